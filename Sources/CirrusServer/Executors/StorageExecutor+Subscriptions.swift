import CirrusStore
import CirrusWire

extension StorageExecutor {
    /// Notifications read per batch of `CKFetchNotificationChangesOperation` when its
    /// `results_limit` is 0, and the most one reads.
    public static let notificationBatchSize = 400
    /// Notifications a watch reads from its feed at a time.
    static let watchBatchSize = 128

    /// CKModifySubscriptionsOperation: one save event per subscription, then one delete event
    /// per ID, in request order; per-item errors end it with `partialFailure`.
    func modifySubscriptions(_ request: Wire.ModifySubscriptionsRequest, _ context: Context) async throws
        -> OperationCompletion
    {
        if let refused = Self.tooManyItems(request.subscriptionsToSave.count + request.subscriptionIDsToDelete.count) {
            return refused
        }
        if let checkpoint = context.checkpoint, checkpoint.isFinished {
            return Self.completion(partialErrors: context.priorErrors, items: "subscriptions")
        }
        let result = try await self.storage.modifySubscriptions(
            saving: request.subscriptionsToSave.map { context.owners.inbound($0) },
            deleting: request.subscriptionIDsToDelete,
            in: context.database,
            by: context.caller.userRecordName
        )
        var events: [Wire.Event.Payload] = result.saves.map { outcome in
            .modifySubscriptions(Wire.ModifySubscriptionsEvent(callback: .perSubscriptionSave(
                self.outbound(outcome, context))))
        }
        events += result.deletes.map { deletion in
            let deleted = Wire.SubscriptionDeleted(
                subscriptionID: deletion.id, error: deletion.failure.map(context.owners.outbound))
            return .modifySubscriptions(Wire.ModifySubscriptionsEvent(callback: .perSubscriptionDelete(deleted)))
        }
        try await context.emit(events, checkpoint: LongLivedCheckpoint(items: events.count, finished: true))
        return Self.completion(partialErrors: events.compactMap(LongLivedCheckpoint.itemError), items: "subscriptions")
    }

    /// CKFetchSubscriptionsOperation: one result per ID (`unknownItem` for a missing one), or
    /// every subscription of the caller in the database.
    func fetchSubscriptions(_ request: Wire.FetchSubscriptionsRequest, _ context: Context) async throws
        -> OperationCompletion
    {
        if !request.fetchAllSubscriptions, let refused = Self.tooManyItems(request.subscriptionIDs.count) {
            return refused
        }
        if let checkpoint = context.checkpoint, checkpoint.isFinished {
            return Self.completion(partialErrors: context.priorErrors, items: "subscriptions")
        }
        let outcomes = try await self.storage.fetchSubscriptions(
            request.fetchAllSubscriptions ? nil : request.subscriptionIDs,
            in: context.database,
            of: context.caller.userRecordName
        )
        let events = outcomes.map { outcome -> Wire.Event.Payload in
            .fetchSubscriptions(Wire.FetchSubscriptionsEvent(callback: .perSubscriptionResult(self.outbound(outcome, context))))
        }
        try await context.emit(events, checkpoint: LongLivedCheckpoint(items: events.count, finished: true))
        return Self.completion(partialErrors: events.compactMap(LongLivedCheckpoint.itemError), items: "subscriptions")
    }

    /// A subscription saved or fetched (or why not) as the client sees it.
    private func outbound(_ outcome: SubscriptionSaveOutcome, _ context: Context) -> Wire.SubscriptionOutcome {
        let wire: Wire.SubscriptionOutcome.Outcome =
            switch outcome.result {
            case .success(let subscription): .subscription(context.owners.outbound(subscription))
            case .failure(let failure): .error(context.owners.outbound(failure))
            }
        return Wire.SubscriptionOutcome(subscriptionID: outcome.id, outcome: wire)
    }

    // MARK: - Notifications (container-level)

    /// The caller's notification feed in the `Open`'s container, and the key its tokens are
    /// sealed for.
    static func notificationFeed(_ open: Wire.Open, caller: ClientIdentity) throws(Refusal)
        -> (feed: NotificationFeedKey, tokenKey: DatabaseKey)
    {
        guard !open.containerIdentifier.isEmpty else {
            throw Refusal(error: Wire.OperationError(code: .badContainer, message: "Open names no container"))
        }
        let feed = NotificationFeedKey(container: open.containerIdentifier, user: caller.userRecordName)
        return (feed, DatabaseKey(container: feed.container, scope: .unspecified, owner: feed.user))
    }

    /// The position a notification token names.
    private func position(
        _ token: Wire.ServerChangeToken?, tokenKey: DatabaseKey
    ) throws(Refusal) -> Int64? {
        guard let token else { return nil }
        do {
            return try self.tokens.open(token, .notifications, in: tokenKey).seq
        } catch {
            throw Refusal(error: Wire.OperationError(code: .invalidArguments, message: error.message))
        }
    }

    private func token(_ seq: Int64, _ tokenKey: DatabaseKey) -> Wire.ServerChangeToken {
        self.tokens.seal(.notifications, in: tokenKey, incarnation: 0, seq: seq, floor: 0)
    }

    /// CKFetchNotificationChangesOperation: the caller's notifications after the token (all
    /// kept ones without one), oldest first, then the token after the last and `moreComing`.
    func fetchNotificationChanges(
        _ request: Wire.FetchNotificationChangesRequest, _ open: Wire.Open, caller: ClientIdentity,
        stream: OperationStream
    ) async throws -> OperationCompletion {
        let feed: NotificationFeedKey
        let tokenKey: DatabaseKey
        let after: Int64?
        do {
            (feed, tokenKey) = try Self.notificationFeed(open, caller: caller)
            after = try self.position(request.previousServerChangeToken, tokenKey: tokenKey)
        } catch {
            return OperationCompletion(error: error.error)
        }
        let limit =
            request.resultsLimit == 0
            ? Self.notificationBatchSize : min(Int(request.resultsLimit), Self.notificationBatchSize)
        let context = Context(
            database: tokenKey, caller: caller, owners: ZoneOwnerMapping(databaseOwner: caller.userRecordName),
            stream: stream, run: stream.run)
        let batch: NotificationBatch
        if let checkpoint = context.checkpoint, checkpoint.isFinished, let lastSeq = checkpoint.since {
            // A long-lived fetch that journaled its events before a restart: only its result is left.
            batch = NotificationBatch(notifications: [], lastSeq: lastSeq, moreComing: checkpoint.moreComing ?? false)
        } else {
            batch = try await self.storage.notificationChanges(for: feed, after: after, limit: limit)
            let events = batch.notifications.map { stored -> Wire.Event.Payload in
                .fetchNotificationChanges(Wire.FetchNotificationChangesEvent(
                    callback: .notificationChanged(Self.outbound(stored, caller: caller))))
            }
            try await context.emit(
                events,
                checkpoint: LongLivedCheckpoint(
                    items: events.count, since: batch.lastSeq, moreComing: batch.moreComing, finished: true))
        }
        return .success(.fetchNotificationChanges(Wire.FetchNotificationChangesResult(
            serverChangeToken: self.token(batch.lastSeq, tokenKey), moreComing: batch.moreComing)))
    }

    /// WatchNotifications: replays the notifications after `since` (none without it), says
    /// `live` with the position it reached, then sends each new notification of the caller as
    /// its write commits, for as long as the stream stays open: the hub hands over what the
    /// commit wrote, and the feed is read only over a gap (see ``NotificationHub``). `emit` waits
    /// for the client's credit, so a watch that does not read holds nothing but its position
    /// and a bounded mailbox: the notifications stay in the feed until it reads on.
    func watchNotifications(
        _ request: Wire.WatchNotificationsRequest, _ open: Wire.Open, caller: ClientIdentity, stream: OperationStream
    ) async throws -> OperationCompletion {
        let feed: NotificationFeedKey
        let tokenKey: DatabaseKey
        let since: Int64?
        do {
            (feed, tokenKey) = try Self.notificationFeed(open, caller: caller)
            since = try self.position(request.since, tokenKey: tokenKey)
        } catch {
            return OperationCompletion(error: error.error)
        }
        // Registered before the starting position is read: a commit in between still reaches it.
        let watch = self.notifications.watch(feed)
        defer { self.notifications.stopWatching(watch) }
        var after: Int64
        if let since {
            after = since
        } else {
            after = try await self.storage.notificationFeedHead(feed)
        }
        let scopes = Set(request.databaseScopes.map(\.rawValue))
        var signals = watch.signals.makeAsyncIterator()
        var isLive = false
        var delivery = NotificationHub.Delivery.gap
        while true {
            let notifications: [StoredNotification]
            var moreComing = false
            switch delivery {
            case .notifications(let delivered):
                notifications = delivered
                after = delivered.last?.seq ?? after
            case .gap:
                let batch = try await self.storage.notificationChanges(for: feed, after: after, limit: Self.watchBatchSize)
                notifications = batch.notifications
                after = batch.lastSeq
                moreComing = batch.moreComing
            }
            let sent = notifications.filter { scopes.isEmpty || scopes.contains($0.scope.rawValue) }
            let events = sent.lazy
                .map { stored -> Wire.Event.Payload in
                    let watched = Wire.WatchedNotification(
                        notification: Self.outbound(stored, caller: caller), changeToken: self.token(stored.seq, tokenKey))
                    return .watchNotifications(Wire.WatchNotificationsEvent(callback: .notification(watched)))
                }
            if !events.isEmpty {
                try await stream.emit(contentsOf: Array(events))
            }
            if isLive, let metrics = self.metrics {
                for created in sent.compactMap(\.notification.creationDate) {
                    metrics.notificationDelivered(createdAt: created)
                }
            }
            if moreComing {
                delivery = .gap
                continue
            }
            if !isLive {
                try await stream.emit(.watchNotifications(Wire.WatchNotificationsEvent(callback: .live(self.token(after, tokenKey)))))
                isLive = true
            }
            guard await signals.next() != nil else { throw CancellationError() }
            delivery = watch.take(after: after)
        }
    }

    /// A stored notification as its user sees it: IDs in the user's own private database name
    /// `__defaultOwner__`, as everywhere else.
    static func outbound(_ stored: StoredNotification, caller: ClientIdentity) -> Wire.PushNotification {
        let owners = ZoneOwnerMapping(databaseOwner: stored.scope == .public ? "" : caller.userRecordName)
        var notification = stored.notification
        switch notification.detail {
        case .query(var query):
            query.recordID = query.recordID.map(owners.outbound)
            query.recordFields = owners.outbound(Wire.Record(fields: query.recordFields)).fields
            notification.detail = .query(query)
        case .recordZone(var zone):
            zone.zoneID = zone.zoneID.map(owners.outbound)
            notification.detail = .recordZone(zone)
        case .database, nil:
            break
        }
        return notification
    }
}

extension ZoneOwnerMapping {
    func inbound(_ subscription: Wire.Subscription) -> Wire.Subscription {
        self.map(subscription, zone: self.inbound)
    }

    func outbound(_ subscription: Wire.Subscription) -> Wire.Subscription {
        self.map(subscription, zone: self.outbound)
    }

    private func map(
        _ subscription: Wire.Subscription, zone: (Wire.RecordZoneID) -> Wire.RecordZoneID
    ) -> Wire.Subscription {
        var subscription = subscription
        switch subscription.kind {
        case .query(var query):
            query.zoneID = query.zoneID.map(zone)
            subscription.kind = .query(query)
        case .recordZone(var recordZone):
            recordZone.zoneID = recordZone.zoneID.map(zone)
            subscription.kind = .recordZone(recordZone)
        case .database, nil:
            break
        }
        return subscription
    }
}
