import CirrusKit

// The app around the samples of seed 002 ("CloudKit Operations"): the functions and values
// the samples call but do not define, kept in memory. Each sample is in the file of its seed
// section, verbatim apart from the import; a sample that is not a whole program is wrapped
// in a function whose parameters are the values it uses (said beside it).

/// The samples' local store: records, tokens and the work queues they mention.
final class LocalStore: @unchecked Sendable {
    // @unchecked Sendable: every property is behind `lock`.
    private let lock = NSLock()
    private var records: [CKRecord.ID: CKRecord] = [:]
    private var zoneTokens: [CKRecordZone.ID: CKServerChangeToken] = [:]
    private var databaseToken: CKServerChangeToken?
    private var notificationToken: CKServerChangeToken?
    private var retries: [CKRecord.ID] = []

    static let shared = LocalStore()

    func save(_ record: CKRecord) { lock.withLock { records[record.recordID] = record } }
    func delete(_ id: CKRecord.ID) { lock.withLock { records[id] = nil } }
    func deleteZone(_ zoneID: CKRecordZone.ID) { lock.withLock { records = records.filter { $0.key.zoneID != zoneID } } }
    func tokens() -> [CKRecordZone.ID: CKServerChangeToken] { lock.withLock { zoneTokens } }
    func setTokens(_ tokens: [CKRecordZone.ID: CKServerChangeToken]) { lock.withLock { zoneTokens = tokens } }
    func database() -> CKServerChangeToken? { lock.withLock { databaseToken } }
    func setDatabase(_ token: CKServerChangeToken?) { lock.withLock { databaseToken = token } }
    func notifications() -> CKServerChangeToken? { lock.withLock { notificationToken } }
    func setNotifications(_ token: CKServerChangeToken?) { lock.withLock { notificationToken = token } }
    func retry(_ id: CKRecord.ID) { lock.withLock { retries.append(id) } }
}

func processRecord(_ record: CKRecord) { LocalStore.shared.save(record) }
func processResults(_ records: [CKRecord]) { records.forEach(LocalStore.shared.save) }
func handleError(_ error: any Error, for recordID: CKRecord.ID) { print("\(recordID): \(error)") }
func saveLocally(_ record: CKRecord) { LocalStore.shared.save(record) }
func deleteLocally(_ recordID: CKRecord.ID) { LocalStore.shared.delete(recordID) }
func loadTokens() -> [CKRecordZone.ID: CKServerChangeToken] { LocalStore.shared.tokens() }
func saveTokens(_ tokens: [CKRecordZone.ID: CKServerChangeToken]) { LocalStore.shared.setTokens(tokens) }
func loadDatabaseToken() -> CKServerChangeToken? { LocalStore.shared.database() }
func saveDatabaseToken(_ token: CKServerChangeToken) { LocalStore.shared.setDatabase(token) }
func deleteLocalZoneData(_ zoneID: CKRecordZone.ID) { LocalStore.shared.deleteZone(zoneID) }
func loadNotificationToken() -> CKServerChangeToken? { LocalStore.shared.notifications() }
func saveNotificationToken(_ token: CKServerChangeToken) { LocalStore.shared.setNotifications(token) }
func markAsUploaded(_ recordID: CKRecord.ID) { print("uploaded \(recordID.recordName)") }
func handleConflict(_ recordID: CKRecord.ID, error: CKError) { LocalStore.shared.retry(recordID) }
func requeueForSmallerBatch(_ recordID: CKRecord.ID) { LocalStore.shared.retry(recordID) }
func requeueForRetry(_ recordID: CKRecord.ID) { LocalStore.shared.retry(recordID) }

extension Array {
    /// The array in consecutive pieces of at most `size` elements (the batching sample's
    /// helper; not part of the standard library).
    func chunked(into size: Int) -> [[Element]] {
        stride(from: 0, to: count, by: Swift.max(size, 1)).map { Array(self[$0..<Swift.min($0 + size, count)]) }
    }
}

// The seed writes `Operation(...)` for "arguments left out". `...` is a value in Swift (the
// unbounded range), so these initializers let those lines compile as written: each makes the
// operation with its arguments left out.
extension CKModifyRecordsOperation {
    convenience init(_ argumentsLeftOut: UnboundedRange) { self.init() }
}

extension CKFetchRecordZoneChangesOperation {
    convenience init(_ argumentsLeftOut: UnboundedRange) { self.init() }
}

/// The query sample's next page: the same query continued from `cursor`.
func fetchNextPage(cursor: CKQueryOperation.Cursor) {
    CKContainer.default().privateCloudDatabase.add(CKQueryOperation(cursor: cursor))
}

/// The database-changes sample's next step: fetch the changed zones' records.
func fetchZoneChanges(for zoneIDs: [CKRecordZone.ID]) {
    CKContainer.default().privateCloudDatabase.add(CKFetchRecordZoneChangesOperation(recordZoneIDs: zoneIDs))
}
