import CirrusWire

/// Which database of a container (`CKDatabase.Scope`), with Apple's raw values.
public enum CKDatabaseScope: Int, Hashable, Sendable, CaseIterable {
    case `public` = 1
    case `private` = 2
    case shared = 3

    /// The scope of a wire value; `nil` for unspecified or unknown values.
    package init?(wire: Wire.DatabaseScope) {
        switch wire {
        case .public: self = .public
        case .private: self = .private
        case .shared: self = .shared
        case .unspecified, .unrecognized: return nil
        }
    }

    /// The scope as a wire value.
    package var wireScope: Wire.DatabaseScope {
        switch self {
        case .public: .public
        case .private: .private
        case .shared: .shared
        }
    }
}
