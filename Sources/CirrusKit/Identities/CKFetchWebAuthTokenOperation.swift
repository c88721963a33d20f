import CirrusModel
import CirrusWire
import Foundation

/// Fetches a short-lived bearer token for the current user (CloudKit's
/// `CKFetchWebAuthTokenOperation`) that another client — a web page, a device without a
/// certificate — presents instead (`CirrusClientConfiguration.bearerToken`).
///
/// The token is valid for the server's `--web-auth-token-lifetime` (one hour by default) and
/// can be revoked before (`cirrusd tokens revoke ID`), which also closes the connections using
/// it. Only a client that authenticated with a certificate gets one.
///
/// For example:
/// ```swift
/// let operation = CKFetchWebAuthTokenOperation(apiToken: "my-container-api-token")
/// operation.fetchWebAuthTokenResultBlock = { result in
///     if case .success(let token) = result { hand(token, to: webClient) }
/// }
/// container.privateCloudDatabase.add(operation)
/// ```
open class CKFetchWebAuthTokenOperation: CKDatabaseOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation — properties are set before start, blocks run on the
    // serial callback queue.

    /// The container's API token (required, not empty).
    open var apiToken: String?
    /// The token, or why none was issued.
    open var fetchWebAuthTokenResultBlock: ((Result<String, any Error>) -> Void)?
    /// Deprecated in CloudKit (use `fetchWebAuthTokenResultBlock`).
    open var fetchWebAuthTokenCompletionBlock: ((String?, (any Error)?) -> Void)?

    public required override init() {
        super.init()
    }

    public convenience init(apiToken: String) {
        self.init()
        self.apiToken = apiToken
    }

    override func makeRequest(maximumItems: Int) throws -> Wire.Open.Request {
        guard let apiToken = self.apiToken, !apiToken.isEmpty else {
            throw CKError(.invalidArguments, message: "CKFetchWebAuthTokenOperation needs an apiToken")
        }
        return .fetchWebAuthToken(Wire.FetchWebAuthTokenRequest(apiToken: apiToken))
    }

    override func deliverResult(_ error: (any Error)?, complete: Wire.Complete?) {
        if let error {
            self.fetchWebAuthTokenResultBlock?(.failure(error))
            self.fetchWebAuthTokenCompletionBlock?(nil, error)
            return
        }
        guard case .fetchWebAuthToken(let result)? = complete?.result, !result.webAuthToken.isEmpty else {
            let missing = CKError(.internalError, message: "the server's answer carries no token")
            self.fetchWebAuthTokenResultBlock?(.failure(missing))
            self.fetchWebAuthTokenCompletionBlock?(nil, missing)
            return
        }
        self.fetchWebAuthTokenResultBlock?(.success(result.webAuthToken))
        self.fetchWebAuthTokenCompletionBlock?(result.webAuthToken, nil)
    }
}
