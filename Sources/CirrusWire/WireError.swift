/// An error in the Cirrus wire protocol: a frame or message that cannot be read or written.
///
/// For example:
/// ```swift
/// do { _ = try Wire.Frame(serializedBytes: bytes) }
/// catch let error as WireError where error.code == .malformedMessage { … }
/// ```
public struct WireError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of wire error this is. Grows without breaking callers.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Base: Hashable, Sendable {
            case frameTooLarge
            case malformedMessage
            case messageTooLarge
            case protocolViolation
        }
        fileprivate let base: Base

        /// A frame's length prefix is above the configured maximum.
        public static let frameTooLarge = Code(base: .frameTooLarge)
        /// The bytes are not a valid protobuf message of the expected type.
        public static let malformedMessage = Code(base: .malformedMessage)
        /// A message is too large to encode into one frame.
        public static let messageTooLarge = Code(base: .messageTooLarge)
        /// The peer broke a rule of the protocol (stream state, sequence, credit, limits).
        public static let protocolViolation = Code(base: .protocolViolation)

        public var description: String {
            switch base {
            case .frameTooLarge: "frame too large"
            case .malformedMessage: "malformed message"
            case .messageTooLarge: "message too large"
            case .protocolViolation: "protocol violation"
            }
        }
    }

    /// The kind of error.
    public var code: Code
    /// A human-readable explanation, safe to send to the peer.
    public var message: String

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public static func frameTooLarge(length: Int, maximum: Int) -> WireError {
        WireError(code: .frameTooLarge, message: "frame of \(length) bytes exceeds the maximum of \(maximum) bytes")
    }

    public static func malformedMessage(_ what: String) -> WireError {
        WireError(code: .malformedMessage, message: what)
    }

    public static func protocolViolation(_ what: String) -> WireError {
        WireError(code: .protocolViolation, message: what)
    }

    public var description: String { "\(code): \(message)" }
}
