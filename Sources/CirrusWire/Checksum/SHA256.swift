internal import COpenSSL

extension Wire {
/// SHA-256 (FIPS 180-4): the checksum of asset content on the wire (`Asset.sha256`), here so
/// the client and the server compute it the same way. Computed by OpenSSL's libcrypto, which
/// both already link for TLS.
///
/// For example: `Wire.SHA256.hash(bytes)`, or `update(_:)` repeatedly, then `finalize()`.
public struct SHA256: Sendable {
    /// The digest state; copied before a mutation while another value shares it, so a copy of
    /// a hasher goes on independently (value semantics).
    private var context: DigestContext

    public init() {
        self.context = DigestContext()
    }

    /// The digest of `bytes`.
    public static func hash(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        let digest: [UInt8]? = bytes.withContiguousStorageIfAvailable { Self.hash(buffer: UnsafeRawBufferPointer($0)) }
        return digest ?? Array(bytes).withUnsafeBytes { Self.hash(buffer: $0) }
    }

    /// The digest of the bytes in `buffer`, in one call.
    public static func hash(buffer: UnsafeRawBufferPointer) -> [UInt8] {
        cirrus_openssl_prepare()
        return [UInt8](unsafeUninitializedCapacity: 32) { digest, count in
            var length: UInt32 = 0
            let done = EVP_Digest(buffer.baseAddress, buffer.count, digest.baseAddress, &length, EVP_sha256(), nil)
            count = done == 1 ? Int(length) : 0
        }
    }

    public mutating func update(_ bytes: some Sequence<UInt8>) {
        let handled: Void? = bytes.withContiguousStorageIfAvailable { self.update(buffer: UnsafeRawBufferPointer($0)) }
        if handled == nil {
            Array(bytes).withUnsafeBytes { self.update(buffer: $0) }
        }
    }

    public mutating func update(buffer: UnsafeRawBufferPointer) {
        guard buffer.count > 0 else { return }
        self.makeUnique()
        EVP_DigestUpdate(self.context.pointer, buffer.baseAddress, buffer.count)
    }

    /// The digest of everything given to `update`; the hasher then starts over.
    public mutating func finalize() -> [UInt8] {
        self.makeUnique()
        let context = self.context
        let digest = [UInt8](unsafeUninitializedCapacity: 32) { digest, count in
            var length: UInt32 = 0
            let done = EVP_DigestFinal_ex(context.pointer, digest.baseAddress, &length)
            count = done == 1 ? Int(length) : 0
        }
        context.reset()
        return digest
    }

    private mutating func makeUnique() {
        if !isKnownUniquelyReferenced(&self.context) {
            self.context = self.context.copy()
        }
    }
}
}

/// An `EVP_MD_CTX` set up for SHA-256, owned by one `Wire.SHA256` value at a time.
// @unchecked Sendable: the context is only mutated by a `Wire.SHA256` that holds the only
// reference (it copies a shared one first), so no two threads ever mutate it; a shared one is
// only read (copied from).
final class DigestContext: @unchecked Sendable {
    let pointer: OpaquePointer

    init() {
        self.pointer = Self.allocate()
        self.reset()
    }

    private init(copying other: DigestContext) {
        self.pointer = Self.allocate()
        EVP_MD_CTX_copy_ex(self.pointer, other.pointer)
    }

    /// A new `EVP_MD_CTX`. Only an allocation can fail here, never input, so running out of
    /// memory stops the process as any other failed allocation in Swift does.
    private static func allocate() -> OpaquePointer {
        cirrus_openssl_prepare()
        guard let pointer = EVP_MD_CTX_new() else {
            fatalError("OpenSSL could not allocate a digest context (out of memory)")
        }
        return pointer
    }

    func copy() -> DigestContext {
        DigestContext(copying: self)
    }

    /// Starts a new SHA-256 digest.
    func reset() {
        EVP_DigestInit_ex(self.pointer, EVP_sha256(), nil)
    }

    deinit {
        EVP_MD_CTX_free(self.pointer)
    }
}
