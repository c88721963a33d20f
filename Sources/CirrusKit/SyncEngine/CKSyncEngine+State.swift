import CirrusModel
import Foundation
import NIOConcurrencyHelpers

extension CKSyncEngine {
    /// What the sync engine has yet to do (CloudKit's `CKSyncEngine.State`): the changes to
    /// send, and the zones with server changes not fetched yet. Safe to use from any thread.
    ///
    /// Adding or removing a pending change produces a `.stateUpdate` event; with
    /// `automaticallySync`, an added change is sent soon after (debounced, batched).
    ///
    /// A change added again while a send carrying it is in flight stays pending after that send
    /// succeeds: the record may have changed after the engine asked for it, so it is sent once
    /// more rather than lost.
    ///
    /// For example:
    /// ```swift
    /// syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(note.recordID)])
    /// syncEngine.state.remove(pendingRecordZoneChanges: [.deleteRecord(oldID)])
    /// ```
    public final class State: Sendable, CustomStringConvertible {
        struct Locked {
            var contents: Contents
            /// Changes carried by the send under way (or by the one a previous process left).
            var inFlight: Set<PendingRecordZoneChange> = []
            /// In-flight changes added again since their batch was asked of the delegate.
            var touched: Set<PendingRecordZoneChange> = []
            /// Changes added since the engine asked the delegate for the batch it is about to
            /// send (nil when it is not building one): those the send carries were added again
            /// after the delegate may have read them (``beginSend``).
            var addedSinceBatch: Set<PendingRecordZoneChange>?
            /// The contents changed since the last `.stateUpdate`.
            var dirty = false
            /// Called after the app changed the state; `true` when it added something to send
            /// (the engine schedules a `.stateUpdate`, and with automatic sync a send).
            var onChange: (@Sendable (_ added: Bool) -> Void)?
        }

        let locked: NIOLockedValueBox<Locked>

        init(_ contents: Contents) {
            var locked = Locked(contents: contents)
            if let send = contents.inFlightSend {
                locked.inFlight = Set(send.changes)
            }
            self.locked = NIOLockedValueBox(locked)
        }

        /// The record changes not sent yet, in the order they were first added.
        public var pendingRecordZoneChanges: [PendingRecordZoneChange] {
            self.locked.withLockedValue { $0.contents.pendingRecordZoneChanges }
        }

        /// The zone changes not sent yet, in the order they were first added.
        public var pendingDatabaseChanges: [PendingDatabaseChange] {
            self.locked.withLockedValue { $0.contents.pendingDatabaseChanges }
        }

        /// Set it when your app has changes it has not added as pending changes: the next send
        /// asks the delegate for a batch even with no pending changes, and the engine clears it
        /// once a send finished.
        public var hasPendingUntrackedChanges: Bool {
            get { self.locked.withLockedValue { $0.contents.hasPendingUntrackedChanges } }
            set {
                let onChange = self.locked.withLockedValue { state -> (@Sendable (Bool) -> Void)? in
                    guard state.contents.hasPendingUntrackedChanges != newValue else { return nil }
                    state.contents.hasPendingUntrackedChanges = newValue
                    state.dirty = true
                    return state.onChange
                }
                onChange?(newValue)
            }
        }

        /// Zones the server reported changed whose changes the engine has not fetched yet.
        public var zoneIDsWithUnfetchedServerChanges: [CKRecordZone.ID] {
            self.locked.withLockedValue { $0.contents.zonesNeedingFetch }
        }

        /// Adds record changes to send; a change already pending keeps its place.
        public func add(pendingRecordZoneChanges changes: [PendingRecordZoneChange]) {
            let onChange = self.locked.withLockedValue { state -> (@Sendable (Bool) -> Void)? in
                var present = Set(state.contents.pendingRecordZoneChanges)
                for change in changes {
                    if state.inFlight.contains(change) { state.touched.insert(change) }
                    state.addedSinceBatch?.insert(change)
                    if present.insert(change).inserted {
                        state.contents.pendingRecordZoneChanges.append(change)
                    }
                    // A save and a delete of one record: the last one added wins.
                    let opposite: PendingRecordZoneChange
                    switch change {
                    case .saveRecord(let id): opposite = .deleteRecord(id)
                    case .deleteRecord(let id): opposite = .saveRecord(id)
                    }
                    if present.remove(opposite) != nil {
                        state.contents.pendingRecordZoneChanges.removeAll { $0 == opposite }
                    }
                }
                state.dirty = state.dirty || !changes.isEmpty
                return changes.isEmpty ? nil : state.onChange
            }
            onChange?(true)
        }

        /// Removes record changes (that you no longer want sent).
        public func remove(pendingRecordZoneChanges changes: [PendingRecordZoneChange]) {
            let removing = Set(changes)
            let onChange = self.locked.withLockedValue { state -> (@Sendable (Bool) -> Void)? in
                let before = state.contents.pendingRecordZoneChanges.count
                state.contents.pendingRecordZoneChanges.removeAll { removing.contains($0) }
                state.touched.subtract(removing)
                state.addedSinceBatch?.subtract(removing)
                guard before != state.contents.pendingRecordZoneChanges.count else { return nil }
                state.dirty = true
                return state.onChange
            }
            onChange?(false)
        }

        /// Adds zone changes to send; a change already pending keeps its place (a `.saveZone`
        /// added again replaces the zone it carries).
        public func add(pendingDatabaseChanges changes: [PendingDatabaseChange]) {
            let onChange = self.locked.withLockedValue { state -> (@Sendable (Bool) -> Void)? in
                for change in changes {
                    if let index = state.contents.pendingDatabaseChanges.firstIndex(of: change) {
                        state.contents.pendingDatabaseChanges[index] = change
                    } else {
                        let opposite: PendingDatabaseChange
                        switch change {
                        case .saveZone(let zone): opposite = .deleteZone(zone.zoneID)
                        case .deleteZone(let id): opposite = .saveZone(CKRecordZone(zoneID: id))
                        }
                        state.contents.pendingDatabaseChanges.removeAll { $0 == opposite }
                        state.contents.pendingDatabaseChanges.append(change)
                    }
                }
                state.dirty = state.dirty || !changes.isEmpty
                return changes.isEmpty ? nil : state.onChange
            }
            onChange?(true)
        }

        /// Removes zone changes (that you no longer want sent).
        public func remove(pendingDatabaseChanges changes: [PendingDatabaseChange]) {
            let removing = Set(changes)
            let onChange = self.locked.withLockedValue { state -> (@Sendable (Bool) -> Void)? in
                let before = state.contents.pendingDatabaseChanges.count
                state.contents.pendingDatabaseChanges.removeAll { removing.contains($0) }
                guard before != state.contents.pendingDatabaseChanges.count else { return nil }
                state.dirty = true
                return state.onChange
            }
            onChange?(false)
        }

        public var description: String {
            self.locked.withLockedValue {
                "<CKSyncEngine.State: \($0.contents.pendingRecordZoneChanges.count) pending record changes, "
                    + "\($0.contents.pendingDatabaseChanges.count) pending zone changes>"
            }
        }

        // MARK: - For the engine

        /// The state as it is now, to persist.
        var serialization: Serialization {
            self.locked.withLockedValue { Serialization($0.contents) }
        }

        /// Changes the state and marks it for the next `.stateUpdate`.
        func update<T>(_ body: (inout Contents) -> T) -> T {
            self.locked.withLockedValue { state in
                state.dirty = true
                return body(&state.contents)
            }
        }

        func read<T>(_ body: (Contents) -> T) -> T {
            self.locked.withLockedValue { body($0.contents) }
        }

        /// The serialization when the state changed since the last call, else nil.
        func takeUpdate() -> Serialization? {
            self.locked.withLockedValue { state in
                guard state.dirty else { return nil }
                state.dirty = false
                return Serialization(state.contents)
            }
        }

        /// Records that `changes` are about to be sent by long-lived operation `operationID`.
        /// The engine is about to ask the delegate for the next batch.
        func beginBatch() {
            self.locked.withLockedValue { $0.addedSinceBatch = [] }
        }

        /// A batch goes out: its changes are in flight. One the app added again after the
        /// delegate built the batch (``beginBatch()``) counts as touched already: the batch may
        /// carry the value from before.
        func beginSend(operationID: String, changes: [PendingRecordZoneChange]) {
            self.locked.withLockedValue { state in
                state.contents.inFlightSend = InFlightSend(operationID: operationID, changes: changes)
                state.inFlight = Set(changes)
                state.touched = state.addedSinceBatch?.intersection(changes) ?? []
                state.addedSinceBatch = nil
                state.dirty = true
            }
        }

        /// Ends the send under way: `done` (acknowledged, or failed for good) leave the pending
        /// changes unless they were added again meanwhile; the others stay to be sent again.
        func finishSend(done: Set<PendingRecordZoneChange>) {
            self.locked.withLockedValue { state in
                let removing = done.subtracting(state.touched)
                state.contents.pendingRecordZoneChanges.removeAll { removing.contains($0) }
                state.contents.inFlightSend = nil
                state.inFlight = []
                state.touched = []
                state.dirty = true
            }
        }

        func setOnChange(_ onChange: (@Sendable (_ added: Bool) -> Void)?) {
            self.locked.withLockedValue { $0.onChange = onChange }
        }
    }
}
