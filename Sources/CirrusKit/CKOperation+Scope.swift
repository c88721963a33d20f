import CirrusModel

/// What `configuredWith(configuration:group:body:)` gives the convenience calls made in its
/// body: the configuration and group each of their operations runs with.
struct ConvenienceScope: Sendable {
    var configuration: CKOperation.Configuration?
    var group: CKOperationGroup?

    /// The scope of the calling task, if it runs inside `configuredWith`.
    @TaskLocal static var current: ConvenienceScope?

    /// Gives `operation`, made by a convenience call, the scope's configuration (a copy) and
    /// group.
    static func apply(to operation: CKOperation) {
        guard let scope = Self.current else { return }
        if let configuration = scope.configuration { operation.configuration = configuration }
        if let group = scope.group { operation.group = group }
    }

    /// Runs `body` with this scope as the task's.
    func run<R>(_ body: () async throws -> R) async rethrows -> R {
        try await Self.$current.withValue(self) { try await body() }
    }
}

extension CKDatabase {
    /// Runs `body` with this database; every convenience call it makes (`save`, `record(for:)`,
    /// `records(matching:)`, the completion-handler forms …) runs its operation with
    /// `configuration` and `group`, as CloudKit's `configuredWith` does.
    ///
    /// For example:
    /// ```swift
    /// let configuration = CKOperation.Configuration()
    /// configuration.timeoutIntervalForRequest = 10
    /// let saved = try await database.configuredWith(configuration: configuration) { database in
    ///     try await database.save(note)
    /// }
    /// ```
    public func configuredWith<R>(
        configuration: CKOperation.Configuration? = nil,
        group: CKOperationGroup? = nil,
        body: (CKDatabase) async throws -> R
    ) async rethrows -> R {
        try await ConvenienceScope(configuration: configuration, group: group).run { try await body(self) }
    }
}

extension CKContainer {
    /// Runs `body` with this container; every convenience call made in it, on the container or
    /// its databases, runs its operation with `configuration` and `group`.
    public func configuredWith<R>(
        configuration: CKOperation.Configuration? = nil,
        group: CKOperationGroup? = nil,
        body: (CKContainer) async throws -> R
    ) async rethrows -> R {
        try await ConvenienceScope(configuration: configuration, group: group).run { try await body(self) }
    }
}
