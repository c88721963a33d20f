internal import COpenSSL

extension Wire.SHA256 {
    /// HMAC-SHA-256 (RFC 2104), by OpenSSL's libcrypto: what seals change tokens and query
    /// cursors. A key longer than one block (64 bytes) is hashed first, as RFC 2104 says.
    ///
    /// For example: `Wire.SHA256.hmac(key: secret, message: Array("position".utf8))`.
    public static func hmac(key: [UInt8], message: [UInt8]) -> [UInt8] {
        cirrus_openssl_prepare()
        // A one-byte stand-in when the key is empty: HMAC needs a pointer; length 0 is what counts.
        let keyBytes = key.isEmpty ? [0] : key
        return keyBytes.withUnsafeBytes { keyBuffer in
            message.withUnsafeBytes { messageBuffer in
                [UInt8](unsafeUninitializedCapacity: 32) { digest, count in
                    var length: UInt32 = 0
                    let result = HMAC(
                        EVP_sha256(), keyBuffer.baseAddress, Int32(key.count),
                        messageBuffer.baseAddress?.assumingMemoryBound(to: UInt8.self), messageBuffer.count,
                        digest.baseAddress, &length)
                    count = result == nil ? 0 : Int(length)
                }
            }
        }
    }
}
