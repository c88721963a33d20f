import CirrusModel
import Foundation

/// What a sync engine needs from the app (CloudKit's `CKSyncEngineDelegate`): it handles the
/// engine's events and provides the records to send.
///
/// The engine calls the delegate one call at a time, never concurrently, and waits for each
/// call to return: when `handleEvent` returns from a `.stateUpdate`, the engine takes the state
/// as persisted (it sends a batch only after the state naming it was handed over).
///
/// For example:
/// ```swift
/// final class Store: CKSyncEngineDelegate {
///     func handleEvent(_ event: CKSyncEngine.Event, syncEngine: CKSyncEngine) async { … }
///     func nextRecordZoneChangeBatch(_ context: CKSyncEngine.SendChangesContext, syncEngine: CKSyncEngine) async
///         -> CKSyncEngine.RecordZoneChangeBatch? { … }
/// }
/// ```
public protocol CKSyncEngineDelegate: AnyObject, Sendable {
    /// Handles one event; see `CKSyncEngine.Event`.
    func handleEvent(_ event: CKSyncEngine.Event, syncEngine: CKSyncEngine) async

    /// The next batch of record changes to send, or nil when there is nothing (more) to send
    /// in `context.options.scope`. Usually built with
    /// `RecordZoneChangeBatch(pendingChanges:recordProvider:)`.
    func nextRecordZoneChangeBatch(
        _ context: CKSyncEngine.SendChangesContext, syncEngine: CKSyncEngine
    ) async -> CKSyncEngine.RecordZoneChangeBatch?

    /// The options of the next fetch; by default the ones in `context`.
    func nextFetchChangesOptions(
        _ context: CKSyncEngine.FetchChangesContext, syncEngine: CKSyncEngine
    ) async -> CKSyncEngine.FetchChangesOptions
}

extension CKSyncEngineDelegate {
    public func nextFetchChangesOptions(
        _ context: CKSyncEngine.FetchChangesContext, syncEngine: CKSyncEngine
    ) async -> CKSyncEngine.FetchChangesOptions {
        context.options
    }
}
