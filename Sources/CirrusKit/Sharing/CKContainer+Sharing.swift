import CirrusModel
import Foundation
import NIOConcurrencyHelpers

/// Share metadata, participants and acceptance on the container, each one operation
/// (CloudKit's `fetchShareMetadata(with:)`, `fetchShareParticipant(with:)`, `accept(_:)` and
/// their async forms).
///
/// For example:
/// ```swift
/// let metadata = try await container.shareMetadata(for: url)
/// let share = try await container.accept(metadata)
/// let zones = try await container.sharedCloudDatabase.allRecordZones()
/// ```
extension CKContainer {
    /// Fetches the metadata of the share at `url`.
    public func fetchShareMetadata(
        with url: URL, completionHandler: @escaping @Sendable (CKShare.Metadata?, (any Error)?) -> Void
    ) {
        let found = NIOLockedValueBox<Result<CKShare.Metadata, any Error>?>(nil)
        let operation = CKFetchShareMetadataOperation(shareURLs: [url])
        operation.perShareMetadataResultBlock = { _, result in found.withLockedValue { $0 = result } }
        operation.fetchShareMetadataResultBlock = { result in
            switch (result, found.withLockedValue { $0 }) {
            case (_, .success(let metadata)?): completionHandler(metadata, nil)
            case (_, .failure(let error)?): completionHandler(nil, error)
            case (.failure(let error), nil): completionHandler(nil, error)
            case (.success, nil): completionHandler(nil, CKError(.internalError, message: "no metadata for \(url)"))
            }
        }
        ConvenienceScope.apply(to: operation)
        self.add(operation)
    }

    /// The metadata of the share at `url`.
    ///
    /// - throws: `CKError` `.unknownItem` when there is no such share or the user may not open it.
    public func shareMetadata(for url: URL) async throws -> CKShare.Metadata {
        try await withCheckedThrowingContinuation { continuation in
            self.fetchShareMetadata(with: url) { metadata, error in
                if let metadata { continuation.resume(returning: metadata) } else {
                    continuation.resume(throwing: error ?? CKError(.internalError, message: "no metadata for \(url)"))
                }
            }
        }
    }

    /// The metadata of each share URL, or its error.
    ///
    /// - throws: `CKError` when the whole operation fails (not for one URL's error).
    public func shareMetadatas(for urls: [URL]) async throws -> [URL: Result<CKShare.Metadata, any Error>] {
        let results = NIOLockedValueBox<[URL: Result<CKShare.Metadata, any Error>]>([:])
        let operation = CKFetchShareMetadataOperation(shareURLs: urls)
        operation.perShareMetadataResultBlock = { url, result in results.withLockedValue { $0[url] = result } }
        try await self.run(operation) { operation.fetchShareMetadataResultBlock = $0 }
        return results.withLockedValue { $0 }
    }

    /// Fetches a participant to add to a share for `lookupInfo`.
    public func fetchShareParticipant(
        with lookupInfo: CKUserIdentity.LookupInfo,
        completionHandler: @escaping @Sendable (CKShare.Participant?, (any Error)?) -> Void
    ) {
        let found = NIOLockedValueBox<Result<CKShare.Participant, any Error>?>(nil)
        let operation = CKFetchShareParticipantsOperation(userIdentityLookupInfos: [lookupInfo])
        operation.perShareParticipantResultBlock = { _, result in found.withLockedValue { $0 = result } }
        operation.fetchShareParticipantsResultBlock = { result in
            switch (result, found.withLockedValue { $0 }) {
            case (_, .success(let participant)?): completionHandler(participant, nil)
            case (_, .failure(let error)?): completionHandler(nil, error)
            case (.failure(let error), nil): completionHandler(nil, error)
            case (.success, nil): completionHandler(nil, CKError(.internalError, message: "no participant for \(lookupInfo)"))
            }
        }
        ConvenienceScope.apply(to: operation)
        self.add(operation)
    }

    /// A participant to add to a share for `lookupInfo`.
    ///
    /// - throws: `CKError`, `.unknownItem` for a user record ID of nobody.
    public func shareParticipant(for lookupInfo: CKUserIdentity.LookupInfo) async throws -> CKShare.Participant {
        try await withCheckedThrowingContinuation { continuation in
            self.fetchShareParticipant(with: lookupInfo) { participant, error in
                if let participant { continuation.resume(returning: participant) } else {
                    continuation.resume(throwing: error ?? CKError(.internalError, message: "no participant"))
                }
            }
        }
    }

    /// Accepts the share `metadata` describes.
    public func accept(
        _ metadata: CKShare.Metadata, completionHandler: @escaping @Sendable (CKShare?, (any Error)?) -> Void
    ) {
        let found = NIOLockedValueBox<Result<CKShare, any Error>?>(nil)
        let operation = CKAcceptSharesOperation(shareMetadatas: [metadata])
        operation.perShareResultBlock = { _, result in found.withLockedValue { $0 = result } }
        operation.acceptSharesResultBlock = { result in
            switch (result, found.withLockedValue { $0 }) {
            case (_, .success(let share)?): completionHandler(share, nil)
            case (_, .failure(let error)?): completionHandler(nil, error)
            case (.failure(let error), nil): completionHandler(nil, error)
            case (.success, nil): completionHandler(nil, CKError(.internalError, message: "no share accepted"))
            }
        }
        ConvenienceScope.apply(to: operation)
        self.add(operation)
    }

    /// Accepts the share `metadata` describes; the share afterwards.
    ///
    /// - throws: `CKError` `.unknownItem` when the user may not accept it (removed, or not
    ///   invited to a private share).
    public func accept(_ metadata: CKShare.Metadata) async throws -> CKShare {
        try await withCheckedThrowingContinuation { continuation in
            self.accept(metadata) { share, error in
                if let share { continuation.resume(returning: share) } else {
                    continuation.resume(throwing: error ?? CKError(.internalError, message: "no share accepted"))
                }
            }
        }
    }

    /// Accepts each share; each one's share afterwards, or its error.
    ///
    /// - throws: `CKError` when the whole operation fails (not for one share's error).
    public func accept(_ metadatas: [CKShare.Metadata]) async throws -> [CKShare.Metadata: Result<CKShare, any Error>] {
        let results = NIOLockedValueBox<[CKShare.Metadata: Result<CKShare, any Error>]>([:])
        let operation = CKAcceptSharesOperation(shareMetadatas: metadatas)
        operation.perShareResultBlock = { metadata, result in results.withLockedValue { $0[metadata] = result } }
        try await self.run(operation) { operation.acceptSharesResultBlock = $0 }
        return results.withLockedValue { $0 }
    }

    /// Adds `operation` and waits for its result block (set by `setResultBlock`); a
    /// `partialFailure` is not thrown (the per-item results carry it).
    private func run(
        _ operation: CKOperation, setResultBlock: (@escaping @Sendable (Result<Void, any Error>) -> Void) -> Void
    ) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            setResultBlock { result in
                if case .failure(let error) = result, (error as? CKError)?.code != .partialFailure {
                    continuation.resume(throwing: error)
                } else {
                    continuation.resume()
                }
            }
            ConvenienceScope.apply(to: operation)
            self.add(operation)
        }
    }
}
