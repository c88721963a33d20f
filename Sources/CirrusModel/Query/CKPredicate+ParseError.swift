import Foundation

extension CKPredicate {
    /// Why a format string is not a valid CloudKit predicate: the 1-based character position
    /// in the format and what was wrong or expected there.
    ///
    /// For example, `CKPredicate(format: "a OR b").parseError?.description` is
    /// `predicate "a OR b": position 3: OR is not supported by CloudKit`.
    public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError {
        /// The format string that was parsed.
        public let format: String
        /// The 1-based position (in characters) of the offending token; one past the last
        /// character when the problem is at the end of the format.
        public let position: Int
        /// What was wrong or expected at `position`.
        public let message: String

        public init(format: String, position: Int, message: String) {
            self.format = format
            self.position = position
            self.message = message
        }

        public var description: String {
            "predicate \"\(format)\": position \(position): \(message)"
        }

        public var errorDescription: String? { description }

        /// The error an operation fails with: `CKError(.invalidArguments)` whose message is
        /// `description` and whose userInfo holds this error under `NSUnderlyingErrorKey`.
        public var ckError: CKError {
            CKError(.invalidArguments, message: description, userInfo: [NSUnderlyingErrorKey: self])
        }
    }
}
