import CirrusModel
import CirrusWire
import Foundation

/// Resolves share URLs to what they share for the current user (CloudKit's
/// `CKFetchShareMetadataOperation`). Container-level: add it to the container.
///
/// A URL the user may not open (they are not a participant and the share is not public) gets
/// `unknownItem`, exactly as a URL that names no share.
///
/// For example:
/// ```swift
/// let operation = CKFetchShareMetadataOperation(shareURLs: [url])
/// operation.shouldFetchRootRecord = true
/// operation.perShareMetadataResultBlock = { url, result in
///     if case .success(let metadata) = result { print(metadata.share.participants) }
/// }
/// container.add(operation)
/// ```
open class CKFetchShareMetadataOperation: CKOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation — properties are set before start, blocks run on the
    // serial callback queue.

    /// The share URLs to resolve (at most 400).
    open var shareURLs: [URL] = []
    /// Whether each metadata carries its hierarchy's root record (`rootRecord`).
    open var shouldFetchRootRecord = false
    /// The root record's keys to fetch; nil = all.
    open var rootRecordDesiredKeys: [CKRecord.FieldKey]?
    /// One URL's metadata or error.
    open var perShareMetadataResultBlock: ((URL, Result<CKShare.Metadata, any Error>) -> Void)?
    /// The whole operation's outcome (`partialFailure` when a URL failed).
    open var fetchShareMetadataResultBlock: ((Result<Void, any Error>) -> Void)?
    /// Deprecated in CloudKit (use `perShareMetadataResultBlock`).
    open var perShareMetadataBlock: ((URL, CKShare.Metadata?, (any Error)?) -> Void)?
    /// Deprecated in CloudKit (use `fetchShareMetadataResultBlock`).
    open var fetchShareMetadataCompletionBlock: (((any Error)?) -> Void)?

    public override init() {
        super.init()
    }

    public convenience init(shareURLs: [URL]) {
        self.init()
        self.shareURLs = shareURLs
    }

    override func makeRequest(maximumItems: Int) throws -> Wire.Open.Request {
        let urls = self.shareURLs
        guard urls.count <= maximumItems else {
            throw CKError(.limitExceeded, message: "\(urls.count) share URLs in one operation; at most \(maximumItems)")
        }
        return .fetchShareMetadata(
            Wire.FetchShareMetadataRequest(
                shareURLs: urls.map(\.absoluteString), shouldFetchRootRecord: self.shouldFetchRootRecord,
                rootRecordDesiredKeys: self.rootRecordDesiredKeys ?? [],
                rootRecordDesiredKeysSpecified: self.rootRecordDesiredKeys != nil))
    }

    override func handle(event: Wire.Event) {
        guard case .fetchShareMetadata(let payload) = event.payload,
            case .perShareMetadataResult(let outcome)? = payload.callback,
            let url = URL(string: outcome.shareURL)
        else { return }
        let result: Result<CKShare.Metadata, any Error>
        switch outcome.outcome {
        case .metadata(let wire)?:
            result = Result { () throws(CKError) in try CKShare.Metadata(wire: wire) }.mapError { $0 }
        case .error(let error)?:
            result = .failure(CKError(wire: error))
        case nil:
            result = .failure(CKError(.internalError, message: "the server sent no metadata for \(url)"))
        }
        self.perShareMetadataResultBlock?(url, result)
        switch result {
        case .success(let metadata): self.perShareMetadataBlock?(url, metadata, nil)
        case .failure(let error): self.perShareMetadataBlock?(url, nil, error)
        }
    }

    override func deliverResult(_ error: (any Error)?, complete: Wire.Complete?) {
        self.fetchShareMetadataResultBlock?(error.map { .failure($0) } ?? .success(()))
        self.fetchShareMetadataCompletionBlock?(error)
    }
}
