import CirrusModel
import CirrusWire
import Dispatch
import Foundation
import NIOConcurrencyHelpers

/// Moves asset files to and from the server in chunks over a container's connection, never
/// holding a whole file in memory: uploads as `UploadAsset` chunks (resumable by upload ID),
/// downloads as a `DownloadAsset` stream (resumable from an offset) under flow control.
///
/// A chunk or a download cut by a lost connection goes on from where the server (or the local
/// file) got to, on a new connection, up to ``maximumAttempts`` times in a row.
struct AssetTransfer: Sendable {
    /// Kept so its connection stays up while the transfer runs (a container shuts its
    /// connection down when it goes).
    let container: CKContainer
    let manager: ConnectionManager
    let containerIdentifier: String
    let scope: Wire.DatabaseScope
    /// Bytes per upload chunk: one frame each, well inside the default 4 MiB frame.
    var uploadChunkBytes = 3 << 20
    /// Upload chunks in flight at once (the server takes them in turn): client and server
    /// work at the same time instead of waiting for each other.
    var uploadWindow = 4
    /// Bytes per download event.
    var downloadChunkBytes: UInt32 = 2 << 20
    /// Download events in flight: memory held on either side is at most this many chunks.
    var downloadWindow: UInt32 = 8
    /// Attempts in a row without progress before a transfer fails with the network error.
    var maximumAttempts = 6

    init(container: CKContainer, scope: Wire.DatabaseScope) {
        self.container = container
        self.manager = container.connectionManager
        self.containerIdentifier = container.containerIdentifier ?? ""
        self.scope = scope
    }

    /// Runs one request on a stream of its own; `onEvent` sees each event on the stream's
    /// serial queue (returning an error ends the stream with it). Its `Complete`, or the error.
    func run(
        _ request: Wire.Open.Request, window: UInt32 = 1,
        onEvent: (@Sendable (Wire.Event) -> CKError?)? = nil
    ) async throws(CKError) -> Wire.Complete {
        let open = Wire.Open(
            operationID: RandomUUID.string(), databaseScope: self.scope,
            containerIdentifier: self.containerIdentifier, request: request)
        let queue = DispatchQueue(label: "CirrusKit.asset.\(open.operationID)")
        let result: Result<Wire.Complete, CKError> = await withCheckedContinuation { continuation in
            let done = NIOLockedValueBox(false)
            let finish: @Sendable (Result<Wire.Complete, CKError>) -> Void = { result in
                let first = done.withLockedValue { done -> Bool in
                    defer { done = true }
                    return !done
                }
                if first { continuation.resume(returning: result) }
            }
            let streamBox = NIOLockedValueBox<ClientStream?>(nil)
            let stream = ClientStream(open: open, window: window, queue: queue) { delivery in
                switch delivery {
                case .event(let event):
                    if let error = onEvent?(event) {
                        streamBox.withLockedValue { $0 }?.cancel(reason: error.message ?? "asset transfer failed")
                        finish(.failure(error))
                    }
                case .complete(let complete):
                    finish(complete.error.map { .failure(CKError(wire: $0)) } ?? .success(complete))
                case .failed(let failure):
                    finish(.failure(CKError(failure)))
                case .persisted:
                    break
                }
            }
            streamBox.withLockedValue { $0 = stream }
            self.manager.open(stream)
        }
        return try result.get()
    }

    /// Whether `error` is worth another attempt (the connection went, not the request).
    static func isRetryable(_ error: CKError) -> Bool {
        error.code == .networkFailure || error.code == .networkUnavailable || error.code == .serviceUnavailable
    }

    /// Waits before attempt `attempt` (1, 2, …): 100 ms doubling up to 3 s, with jitter.
    static func backoff(_ attempt: Int) async throws(CKError) {
        let base = min(3.0, 0.1 * Double(1 << min(attempt, 5)))
        do {
            try await Task.sleep(nanoseconds: UInt64(base * Double.random(in: 0.5...1.0) * 1e9))
        } catch {
            throw CKError(.operationCancelled, message: "the asset transfer was cancelled")
        }
    }
}
