extension Wire {
    /// The protocol version this build speaks, sent in `Hello` and `HelloAck`.
    public static let protocolVersion: UInt32 = 1
    /// The ALPN protocol name of this version.
    public static let applicationProtocol = "cirrus/1"
}
