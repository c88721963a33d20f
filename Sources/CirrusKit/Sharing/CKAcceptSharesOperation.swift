import CirrusModel
import CirrusWire
import Foundation

/// Accepts shares for the current user (CloudKit's `CKAcceptSharesOperation`): each becomes an
/// accepted participant, and the shared zone appears in their shared database. Container-level:
/// add it to the container.
///
/// For example:
/// ```swift
/// let operation = CKAcceptSharesOperation(shareMetadatas: [metadata])
/// operation.perShareResultBlock = { metadata, result in print(metadata.share.recordID, result) }
/// container.add(operation)
/// ```
open class CKAcceptSharesOperation: CKOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation.

    /// The shares to accept, as `CKFetchShareMetadataOperation` returned them (at most 400).
    open var shareMetadatas: [CKShare.Metadata] = []
    /// One share accepted (the share afterwards) or its error.
    open var perShareResultBlock: ((CKShare.Metadata, Result<CKShare, any Error>) -> Void)?
    /// The whole operation's outcome (`partialFailure` when a share failed).
    open var acceptSharesResultBlock: ((Result<Void, any Error>) -> Void)?
    /// Deprecated in CloudKit (use `perShareResultBlock`).
    open var perShareCompletionBlock: ((CKShare.Metadata, CKShare?, (any Error)?) -> Void)?
    /// Deprecated in CloudKit (use `acceptSharesResultBlock`).
    open var acceptSharesCompletionBlock: (((any Error)?) -> Void)?

    public override init() {
        super.init()
    }

    public convenience init(shareMetadatas: [CKShare.Metadata]) {
        self.init()
        self.shareMetadatas = shareMetadatas
    }

    override func makeRequest(maximumItems: Int) throws -> Wire.Open.Request {
        let metadatas = self.shareMetadatas
        guard metadatas.count <= maximumItems else {
            throw CKError(.limitExceeded, message: "\(metadatas.count) shares in one operation; at most \(maximumItems)")
        }
        return .acceptShares(Wire.AcceptSharesRequest(shareMetadatas: metadatas.map(\.wireMetadata)))
    }

    override func handle(event: Wire.Event) {
        guard case .acceptShares(let payload) = event.payload, case .perShareResult(let outcome)? = payload.callback,
            let metadata = self.shareMetadatas.first(where: { $0.shareURL == outcome.shareURL })
        else { return }
        let result: Result<CKShare, any Error>
        switch outcome.outcome {
        case .share(let wire)?:
            result = Result { () throws(CKError) in try CKShare(shareRecord: wire) }.mapError { $0 }
        case .error(let error)?:
            result = .failure(CKError(wire: error))
        case nil:
            result = .failure(CKError(.internalError, message: "the server sent no share for \(outcome.shareURL)"))
        }
        self.perShareResultBlock?(metadata, result)
        switch result {
        case .success(let share): self.perShareCompletionBlock?(metadata, share, nil)
        case .failure(let error): self.perShareCompletionBlock?(metadata, nil, error)
        }
    }

    override func deliverResult(_ error: (any Error)?, complete: Wire.Complete?) {
        self.acceptSharesResultBlock?(error.map { .failure($0) } ?? .success(()))
        self.acceptSharesCompletionBlock?(error)
    }
}
