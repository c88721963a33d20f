import CirrusWire
import Foundation
import Synchronization

extension CKOperation {
    /// How an operation behaves: container, quality of service, long-lived, timeouts.
    ///
    /// Every property has a default; only values set explicitly take part in merging with the
    /// operation group's `defaultConfiguration` (an explicit operation value wins, then an
    /// explicit group value, then the default), as CloudKit documents.
    ///
    /// For example:
    /// ```swift
    /// operation.configuration.timeoutIntervalForRequest = 30
    /// operation.configuration.qualityOfService = .userInitiated
    /// ```
    open class Configuration: @unchecked Sendable, CustomStringConvertible {
        // @unchecked Sendable: every stored value lives in `storage`, a lock-protected box, so
        // reads and writes from any thread are serialized.

        /// The explicitly set values; nil = not set at this level.
        struct Explicit: Sendable {
            var container: CKContainer?
            var qualityOfService: QualityOfService?
            var allowsCellularAccess: Bool?
            var isLongLived: Bool?
            var timeoutIntervalForRequest: TimeInterval?
            var timeoutIntervalForResource: TimeInterval?
        }

        /// CloudKit's defaults.
        public static let defaultQualityOfService: QualityOfService = .default
        public static let defaultTimeoutIntervalForRequest: TimeInterval = 60
        public static let defaultTimeoutIntervalForResource: TimeInterval = 7 * 24 * 60 * 60

        private let storage: Mutex<Explicit>

        public init() {
            self.storage = Mutex(Explicit())
        }

        init(explicit: Explicit) {
            self.storage = Mutex(explicit)
        }

        var explicit: Explicit { self.storage.withLock { $0 } }

        /// A copy with the same explicit values.
        public func copy() -> Configuration { Configuration(explicit: self.explicit) }

        /// The container the operation runs against; nil = the default container (or the
        /// database's when added to one).
        open var container: CKContainer? {
            get { self.storage.withLock { $0.container } }
            set { self.storage.withLock { $0.container = newValue } }
        }

        /// The priority of the operation's work. Default: `.default`.
        open var qualityOfService: QualityOfService {
            get { self.storage.withLock { $0.qualityOfService } ?? Self.defaultQualityOfService }
            set { self.storage.withLock { $0.qualityOfService = newValue } }
        }

        /// Whether the operation may use a cellular network. Default: true.
        open var allowsCellularAccess: Bool {
            get { self.storage.withLock { $0.allowsCellularAccess } ?? true }
            set { self.storage.withLock { $0.allowsCellularAccess = newValue } }
        }

        /// Whether the operation keeps running on the server when the client goes away. Default: false.
        open var isLongLived: Bool {
            get { self.storage.withLock { $0.isLongLived } ?? false }
            set { self.storage.withLock { $0.isLongLived = newValue } }
        }

        /// The longest wait for more data (connecting, or between events). Default: 60 s.
        open var timeoutIntervalForRequest: TimeInterval {
            get { self.storage.withLock { $0.timeoutIntervalForRequest } ?? Self.defaultTimeoutIntervalForRequest }
            set { self.storage.withLock { $0.timeoutIntervalForRequest = newValue } }
        }

        /// The longest the whole operation may take. Default: 7 days.
        open var timeoutIntervalForResource: TimeInterval {
            get { self.storage.withLock { $0.timeoutIntervalForResource } ?? Self.defaultTimeoutIntervalForResource }
            set { self.storage.withLock { $0.timeoutIntervalForResource = newValue } }
        }

        public var description: String {
            let explicit = self.explicit
            var parts: [String] = []
            if let value = explicit.container { parts.append("container=\(value.containerIdentifier ?? "?")") }
            if let value = explicit.qualityOfService { parts.append("qualityOfService=\(value.rawValue)") }
            if let value = explicit.allowsCellularAccess { parts.append("allowsCellularAccess=\(value)") }
            if let value = explicit.isLongLived { parts.append("isLongLived=\(value)") }
            if let value = explicit.timeoutIntervalForRequest { parts.append("timeoutIntervalForRequest=\(value)") }
            if let value = explicit.timeoutIntervalForResource { parts.append("timeoutIntervalForResource=\(value)") }
            return "<CKOperation.Configuration \(parts.joined(separator: " "))>"
        }
    }
}

/// The configuration an operation actually runs with, after the merge rule.
struct ResolvedConfiguration: Sendable {
    var container: CKContainer?
    var qualityOfService: QualityOfService
    var allowsCellularAccess: Bool
    var isLongLived: Bool
    var timeoutIntervalForRequest: TimeInterval
    var timeoutIntervalForResource: TimeInterval

    /// The operation's explicit value, else the group's explicit value, else the default.
    init(operation: CKOperation.Configuration.Explicit, group: CKOperation.Configuration.Explicit?) {
        let group = group ?? .init()
        typealias Defaults = CKOperation.Configuration
        self.container = operation.container ?? group.container
        self.qualityOfService = operation.qualityOfService ?? group.qualityOfService ?? Defaults.defaultQualityOfService
        self.allowsCellularAccess = operation.allowsCellularAccess ?? group.allowsCellularAccess ?? true
        self.isLongLived = operation.isLongLived ?? group.isLongLived ?? false
        self.timeoutIntervalForRequest =
            operation.timeoutIntervalForRequest ?? group.timeoutIntervalForRequest ?? Defaults.defaultTimeoutIntervalForRequest
        self.timeoutIntervalForResource =
            operation.timeoutIntervalForResource ?? group.timeoutIntervalForResource
            ?? Defaults.defaultTimeoutIntervalForResource
    }
}

extension CKOperation.Configuration.Explicit {
    /// The explicit values as the wire sends them (absent = not set at this level).
    var wire: Wire.OperationConfiguration {
        Wire.OperationConfiguration(
            containerIdentifier: self.container?.containerIdentifier,
            qualityOfService: self.qualityOfService.map(Wire.OperationQualityOfService.init),
            allowsCellularAccess: self.allowsCellularAccess,
            isLongLived: self.isLongLived,
            timeoutIntervalForRequestMs: self.timeoutIntervalForRequest.map(Self.milliseconds),
            timeoutIntervalForResourceMs: self.timeoutIntervalForResource.map(Self.milliseconds)
        )
    }

    private static func milliseconds(_ interval: TimeInterval) -> UInt64 {
        guard interval.isFinite, interval > 0 else { return 0 }
        return UInt64(min(interval * 1000, Double(UInt64.max / 2)))
    }
}

extension Wire.OperationQualityOfService {
    init(_ qualityOfService: QualityOfService) {
        switch qualityOfService {
        case .background: self = .background
        case .utility: self = .utility
        case .userInitiated: self = .userInitiated
        case .userInteractive: self = .userInteractive
        default: self = .default
        }
    }
}
