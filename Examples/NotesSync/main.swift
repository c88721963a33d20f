import CirrusKit

// A notes app on two devices of one user, in one process: each device has its own container
// (its own connection), keeps its own copy of the notes, learns of changes by push
// (a zone subscription, delivered on container.notifications()) and catches up through the
// zone's change feed. Run it against a server (Scripts/run.sh) with the user's credentials in
// the environment, e.g.:
//
//   CIRRUS_CA=Certs/ca.pem CIRRUS_CERT=Certs/alice.pem CIRRUS_KEY=Certs/alice-key.pem \
//       swift run --package-path Examples NotesSync
//
// It exits 0 once both devices agree after each step, 1 if they do not within 60 seconds.

let configuration = CirrusClientConfiguration.fromEnvironment()
let zoneID = CKRecordZone.ID(zoneName: "Notes-" + UUID().uuidString.prefix(8))
let phone = Device(name: "phone", configuration: configuration, zoneID: zoneID)
let laptop = Device(name: "laptop", configuration: configuration, zoneID: zoneID)

/// Waits until `device` holds exactly `titles`, or gives up after a minute.
func waitUntil(_ device: Device, holds titles: [String]) async throws {
    let deadline = ContinuousClock.now.advanced(by: .seconds(60))
    while await device.titles != titles.sorted() {
        guard ContinuousClock.now < deadline else {
            throw NotesError("\(device.name) holds \(await device.titles), not \(titles.sorted())")
        }
        try await Task.sleep(for: .milliseconds(50))
    }
    print("\(device.name): has \(titles.sorted())")
}

/// The user's notification feed position now, so the devices' watches miss nothing after it.
func currentNotificationToken(_ container: CKContainer) async throws -> CKServerChangeToken? {
    var token: CKServerChangeToken?
    var moreComing = true
    while moreComing {
        let operation = CKFetchNotificationChangesOperation(previousServerChangeToken: token)
        let result: (CKServerChangeToken, Bool) = try await withCheckedThrowingContinuation { continuation in
            operation.fetchNotificationChangesResultBlock = { continuation.resume(with: $0.map { ($0.serverChangeToken, $0.moreComing) }) }
            container.add(operation)
        }
        (token, moreComing) = result
    }
    return token
}

do {
    // Once, from either device: the zone and a subscription that pushes every change in it.
    let database = phone.container.privateCloudDatabase
    _ = try await database.save(CKRecordZone(zoneID: zoneID))
    let subscription = try await database.save(CKRecordZoneSubscription(zoneID: zoneID, subscriptionID: "notes-" + zoneID.zoneName))
    let since = try await currentNotificationToken(phone.container)
    for device in [phone, laptop] {
        await device.startWatching(since: since)
        try await device.fetchChanges()
    }

    try await phone.write("Groceries", name: "n1")
    try await waitUntil(laptop, holds: ["Groceries"])
    try await laptop.write("Call mum", name: "n2")
    try await waitUntil(phone, holds: ["Call mum", "Groceries"])
    try await laptop.retitle("n1", to: "Groceries and milk")
    try await waitUntil(phone, holds: ["Call mum", "Groceries and milk"])
    try await phone.delete("n2")
    try await waitUntil(laptop, holds: ["Groceries and milk"])

    for device in [phone, laptop] { await device.stopWatching() }
    _ = try await database.deleteSubscription(withID: subscription.subscriptionID)
    _ = try await database.deleteRecordZone(withID: zoneID)
    print("in sync: both devices hold the same notes after every step")
} catch {
    print("NotesSync failed: \(error)")
    exit(1)
}
