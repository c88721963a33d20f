extension Wire.SHA256 {
    /// HMAC-SHA-256 (RFC 2104): what seals change tokens and query cursors. A key longer than
    /// one block (64 bytes) is hashed first.
    ///
    /// For example: `Wire.SHA256.hmac(key: secret, message: Array("position".utf8))`.
    public static func hmac(key: [UInt8], message: [UInt8]) -> [UInt8] {
        let key = key.count > 64 ? Self.hash(key) : key
        var block = key + [UInt8](repeating: 0, count: 64 - key.count)
        var inner = Self()
        inner.update(block.map { $0 ^ 0x36 })
        inner.update(message)
        let innerDigest = inner.finalize()
        var outer = Self()
        for i in block.indices { block[i] ^= 0x5c }
        outer.update(block)
        outer.update(innerDigest)
        return outer.finalize()
    }
}
