import CirrusWire
import Foundation

/// The sweep's cases: for each request kind of the protocol, one probe per identifier it
/// carries. The `switch` has no `default`, so a kind added to `frame.proto` and regenerated does
/// not compile until it has its cases; ``allKinds`` is checked against `frame.proto` itself.
extension AuthorizationSweepTests {
    /// One empty request of every kind of `Open.request`.
    static let allKinds: [Wire.Open.Request] = [
        .modifyRecords(.init()), .fetchRecords(.init()), .query(.init()), .modifyRecordZones(.init()),
        .fetchRecordZones(.init()), .fetchRecordZoneChanges(.init()), .fetchDatabaseChanges(.init()),
        .fetchSubscriptions(.init()), .modifySubscriptions(.init()), .fetchNotificationChanges(.init()),
        .markNotificationsRead(.init()), .modifyBadge(.init()), .fetchShareMetadata(.init()),
        .fetchShareParticipants(.init()), .acceptShares(.init()), .discoverUserIdentities(.init()),
        .discoverAllUserIdentities(.init()), .fetchWebAuthToken(.init()), .watchNotifications(.init()),
        .uploadAsset(.init()), .downloadAsset(.init()), .fetchLongLivedOperationIDs(.init()),
        .fetchLongLivedOperation(.init()), .fetchUserRecordID(.init()), .accountStatus(.init()),
        .applicationPermission(.init()),
    ]

    /// The kind's name as the generated enum spells it (`fetchRecords`).
    static func kindName(_ request: Wire.Open.Request) -> String {
        String(String(describing: request).prefix { $0 != "(" })
    }

    static func probes(for kind: Wire.Open.Request) -> [SweepProbe] {
        switch kind {
        case .modifyRecords:
            return [
                SweepProbe("save into their custom zone") { ids in
                    .modifyRecords(.init(recordsToSave: [note(ids.customRecord, title: "alice's", zone: ids.customZone)]))
                },
                SweepProbe("save over their default-zone record") { ids in
                    .modifyRecords(.init(recordsToSave: [note(ids.defaultRecord, title: "alice's", zone: ids.defaultZone)]))
                },
                SweepProbe("delete their records") { ids in
                    .modifyRecords(.init(recordIDsToDelete: [
                        recordID(ids.defaultRecord, zone: ids.defaultZone), recordID(ids.customRecord, zone: ids.customZone),
                    ]))
                },
                SweepProbe("atomic save into their custom zone") { ids in
                    .modifyRecords(.init(recordsToSave: [note(ids.customRecord, title: "alice's", zone: ids.customZone)], isAtomic: true))
                },
                SweepProbe("save a record referencing their records (deleteSelf reference and parent)") { ids in
                    var record = note("alice-refers-to-\(ids.customRecord)", title: "alice's")
                    let target = Wire.Reference(recordID: recordID(ids.customRecord, zone: ids.customZone), action: .deleteSelf)
                    record.fields.append(Wire.RecordField(key: "link", value: Wire.FieldValue(kind: .referenceValue(target))))
                    record.parent = Wire.Reference(recordID: recordID(ids.defaultRecord, zone: ids.defaultZone))
                    return .modifyRecords(.init(recordsToSave: [record]))
                },
                SweepProbe(
                    "save over their public record", scope: .public,
                    expectation: .legitimate(because: "public records are everyone's to read, only their creator's to change") {
                        answer, _ in answer.errorCodes == [.permissionFailure] ? nil : "not refused with permissionFailure"
                    }
                ) { ids in .modifyRecords(.init(recordsToSave: [note(ids.publicRecord, title: "alice was here")])) },
                SweepProbe(
                    "delete their public record", scope: .public,
                    expectation: .legitimate(because: "public records are everyone's to read, only their creator's to change") {
                        answer, _ in answer.errorCodes == [.permissionFailure] ? nil : "not refused with permissionFailure"
                    }
                ) { ids in .modifyRecords(.init(recordIDsToDelete: [recordID(ids.publicRecord)])) },
            ]
        case .fetchRecords:
            return [
                SweepProbe("fetch their records by zone owner") { ids in
                    .fetchRecords(.init(recordIDs: [
                        recordID(ids.defaultRecord, zone: ids.defaultZone), recordID(ids.customRecord, zone: ids.customZone),
                    ]))
                },
                SweepProbe("fetch their record names in her own zones") { ids in
                    .fetchRecords(.init(recordIDs: [recordID(ids.defaultRecord), recordID(ids.customRecord)]))
                },
                SweepProbe(
                    "fetch their public record", scope: .public,
                    expectation: .legitimate(because: "everyone may read the public database") { answer, ids in
                        answer.fetchedRecordNames == [ids.publicRecord] ? nil : "alice cannot read a public record"
                    }
                ) { ids in .fetchRecords(.init(recordIDs: [recordID(ids.publicRecord)])) },
            ]
        case .query:
            return [
                SweepProbe("query their custom zone") { ids in
                    .query(.init(start: .query(Wire.Query(recordType: "Note")), zoneID: ids.customZone))
                },
                SweepProbe("query their default zone") { ids in
                    .query(.init(start: .query(Wire.Query(recordType: "Note")), zoneID: ids.defaultZone))
                },
                SweepProbe("continue their private query cursor") { ids in .query(.init(cursor: ids.cursor)) },
                SweepProbe("continue their private query cursor in the public database", scope: .public) { ids in
                    .query(.init(cursor: ids.cursor))
                },
                SweepProbe("continue their public query cursor in her private database") { ids in
                    .query(.init(cursor: ids.publicCursor))
                },
                SweepProbe(
                    "continue their public query cursor", scope: .public,
                    expectation: .legitimate(because: "a public query pages public records, which everyone may read") {
                        answer, _ in answer.complete?.error == nil ? nil : "refused: \(answer)"
                    }
                ) { ids in .query(.init(cursor: ids.publicCursor)) },
            ]
        case .modifyRecordZones:
            return [
                SweepProbe("save a zone under their name") { ids in
                    .modifyRecordZones(.init(recordZonesToSave: [Wire.RecordZone(zoneID: ids.customZone)]))
                },
                SweepProbe("delete their zones") { ids in
                    .modifyRecordZones(.init(recordZoneIDsToDelete: [ids.customZone, ids.defaultZone]))
                },
            ]
        case .fetchRecordZones:
            return [
                SweepProbe("fetch their zones") { ids in
                    .fetchRecordZones(.init(recordZoneIDs: [ids.customZone, ids.defaultZone]))
                },
                SweepProbe("fetch their zone name in her namespace") { ids in
                    .fetchRecordZones(.init(recordZoneIDs: [Wire.RecordZoneID(zoneName: ids.zoneName, ownerName: "__defaultOwner__")]))
                },
            ]
        case .fetchRecordZoneChanges:
            return [
                SweepProbe("fetch changes of their zones") { ids in
                    .fetchRecordZoneChanges(.init(zoneConfigurations: [
                        Wire.ZoneChangesConfiguration(zoneID: ids.customZone), Wire.ZoneChangesConfiguration(zoneID: ids.defaultZone),
                    ]))
                },
                SweepProbe("fetch changes of their zone from its token") { ids in
                    .fetchRecordZoneChanges(.init(zoneConfigurations: [
                        Wire.ZoneChangesConfiguration(zoneID: ids.customZone, previousServerChangeToken: ids.zoneToken),
                    ]))
                },
                SweepProbe("fetch changes of a zone of her own named like theirs, from their token") { ids in
                    .fetchRecordZoneChanges(.init(zoneConfigurations: [
                        Wire.ZoneChangesConfiguration(
                            zoneID: Wire.RecordZoneID(zoneName: ids.zoneName, ownerName: "__defaultOwner__"),
                            previousServerChangeToken: ids.zoneToken),
                    ]))
                },
                SweepProbe("fetch changes of her own default zone from their token") { ids in
                    .fetchRecordZoneChanges(.init(zoneConfigurations: [
                        Wire.ZoneChangesConfiguration(zoneID: SweepWorld.currentUser, previousServerChangeToken: ids.defaultZoneToken),
                    ]))
                },
                SweepProbe("fetch changes of the public default zone from their private token", scope: .public) { ids in
                    .fetchRecordZoneChanges(.init(zoneConfigurations: [
                        Wire.ZoneChangesConfiguration(zoneID: SweepWorld.currentUser, previousServerChangeToken: ids.defaultZoneToken),
                    ]))
                },
            ]
        case .fetchDatabaseChanges:
            return [
                SweepProbe("fetch database changes from their token") { ids in
                    .fetchDatabaseChanges(.init(previousServerChangeToken: ids.databaseToken))
                },
                SweepProbe("fetch public database changes from their token", scope: .public) { ids in
                    .fetchDatabaseChanges(.init(previousServerChangeToken: ids.databaseToken))
                },
            ]
        case .modifySubscriptions:
            return [
                SweepProbe("delete their subscription") { ids in .modifySubscriptions(.init(subscriptionIDsToDelete: [ids.subscription])) },
                SweepProbe("delete their public subscription", scope: .public) { ids in
                    .modifySubscriptions(.init(subscriptionIDsToDelete: [ids.publicSubscription]))
                },
                SweepProbe("subscribe to their zone") { ids in
                    .modifySubscriptions(.init(subscriptionsToSave: [
                        Wire.Subscription(
                            subscriptionID: "alice-watches-\(ids.zoneName)",
                            kind: .recordZone(Wire.RecordZoneSubscription(zoneID: ids.customZone))),
                        Wire.Subscription(
                            subscriptionID: "alice-queries-\(ids.zoneName)",
                            kind: .query(Wire.QuerySubscription(
                                recordType: "Note", zoneID: ids.customZone, firesOnRecordCreation: true))),
                    ]))
                },
                // Subscription IDs are unique per user: saving one under their ID makes her own.
                SweepProbe("save a subscription under their ID (her own namespace)") { ids in
                    .modifySubscriptions(.init(subscriptionsToSave: [
                        Wire.Subscription(subscriptionID: ids.subscription, kind: .database(Wire.DatabaseSubscription())),
                    ]))
                },
                SweepProbe("save a public subscription under their ID (her own namespace)", scope: .public) { ids in
                    .modifySubscriptions(.init(subscriptionsToSave: [
                        Wire.Subscription(
                            subscriptionID: ids.publicSubscription,
                            kind: .query(Wire.QuerySubscription(recordType: "Memo", firesOnRecordCreation: true))),
                    ]))
                },
            ]
        case .fetchSubscriptions:
            return [
                SweepProbe("fetch their subscription") { ids in .fetchSubscriptions(.init(subscriptionIDs: [ids.subscription])) },
                SweepProbe("fetch their public subscription", scope: .public) { ids in
                    .fetchSubscriptions(.init(subscriptionIDs: [ids.publicSubscription]))
                },
            ]
        case .fetchNotificationChanges:
            return [
                SweepProbe("fetch notifications from their token", scope: .unspecified) { ids in
                    .fetchNotificationChanges(.init(previousServerChangeToken: ids.notificationToken))
                }
            ]
        case .markNotificationsRead:
            return [
                SweepProbe("mark their notification read", scope: .unspecified) { ids in
                    .markNotificationsRead(.init(notificationIDs: [ids.notificationID]))
                }
            ]
        case .modifyBadge:
            return [SweepProbe("set her badge", scope: .unspecified, expectation: noIdentifier) { _ in .modifyBadge(.init(badgeValue: 3)) }]
        case .fetchShareMetadata:
            return [
                SweepProbe("fetch metadata of a share URL naming their record", scope: .unspecified) { ids in
                    .fetchShareMetadata(.init(shareURLs: [shareURL(ids)]))
                }
            ]
        case .fetchShareParticipants:
            return [
                SweepProbe("fetch them as a share participant", scope: .unspecified) { ids in
                    .fetchShareParticipants(.init(userIdentityLookupInfos: [lookup(ids)]))
                }
            ]
        case .acceptShares:
            return [
                SweepProbe("accept a share of their zone", scope: .unspecified) { ids in
                    .acceptShares(.init(shareMetadatas: [
                        Wire.ShareMetadata(
                            containerIdentifier: container,
                            share: Wire.Record(
                                recordID: recordID("cloudkit.zoneshare", zone: ids.customZone), recordType: "cloudkit.share"),
                            shareURL: shareURL(ids)),
                    ]))
                }
            ]
        case .discoverUserIdentities:
            // Bob never made himself discoverable, so he must look like nobody.
            return [
                SweepProbe("discover them", scope: .unspecified) { ids in
                    .discoverUserIdentities(.init(userIdentityLookupInfos: [lookup(ids)]))
                }
            ]
        case .discoverAllUserIdentities:
            return [SweepProbe("discover everyone", scope: .unspecified, expectation: noIdentifier) { _ in .discoverAllUserIdentities(.init()) }]
        case .fetchWebAuthToken:
            return [
                SweepProbe("fetch a web auth token", expectation: noIdentifier) { _ in .fetchWebAuthToken(.init(apiToken: "sweep")) }
            ]
        case .watchNotifications:
            return [
                SweepProbe("watch notifications from their token", scope: .unspecified) { ids in
                    .watchNotifications(.init(since: ids.notificationToken))
                }
            ]
        case .uploadAsset:
            return [
                SweepProbe("append to an upload under their name") { ids in
                    .uploadAsset(.init(uploadID: "\(ids.owner)-\(ids.zoneName)-upload", offset: 0, data: [1], totalSize: 1))
                }
            ]
        case .downloadAsset:
            return [
                SweepProbe("download a handle naming their record") { ids in
                    .downloadAsset(.init(downloadHandle: "\(ids.owner)/\(ids.customRecord)/asset"))
                }
            ]
        case .fetchLongLivedOperationIDs:
            return [
                SweepProbe(
                    "list long-lived operations", scope: .unspecified,
                    expectation: .legitimate(because: "the list is the caller's own") { answer, ids in
                        answer.normalized(ids).contains("<operation>") ? "alice's list shows bob's operation" : nil
                    }
                ) { _ in .fetchLongLivedOperationIDs(.init()) }
            ]
        case .fetchLongLivedOperation:
            return [
                SweepProbe("fetch their long-lived operation", scope: .unspecified) { ids in
                    .fetchLongLivedOperation(.init(operationID: ids.operationID))
                },
            ]
        case .fetchUserRecordID:
            return [
                SweepProbe(
                    "fetch her user record ID", scope: .unspecified,
                    expectation: .legitimate(because: "the answer is the caller's own ID") { answer, _ in
                        guard case .fetchUserRecordID(let result) = answer.complete?.result else { return nil }
                        return result.userRecordID?.recordName == "_alice" ? nil : "not alice's: \(result)"
                    }
                ) { _ in .fetchUserRecordID(.init()) }
            ]
        case .accountStatus:
            return [SweepProbe("her account status", scope: .unspecified, expectation: noIdentifier) { _ in .accountStatus(.init()) }]
        case .applicationPermission:
            return [
                SweepProbe("her application permission", scope: .unspecified, expectation: noIdentifier) { _ in
                    .applicationPermission(.init(permission: .userDiscoverability, action: .request))
                }
            ]
        }
    }

    /// For kinds that carry no identifier of anyone: sent once; the sweep checks bob's data.
    static let noIdentifier = SweepProbe.Expectation.legitimate(because: "the request names no one else") { _, _ in nil }

    static func shareURL(_ ids: SweepIdentifiers) -> String {
        "https://cirrus.invalid/share/\(ids.owner)/\(ids.zoneName)/\(ids.customRecord)"
    }

    static func lookup(_ ids: SweepIdentifiers) -> Wire.UserIdentityLookupInfo {
        Wire.UserIdentityLookupInfo(
            emailAddress: "\(ids.owner)@example.com",
            userRecordID: Wire.RecordID(recordName: ids.owner, zoneID: Wire.RecordZoneID(zoneName: "_defaultZone"))
        )
    }
}
