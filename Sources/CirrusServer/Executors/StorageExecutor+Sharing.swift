import CirrusStore
import CirrusWire

/// The sharing kinds: `CKFetchShareMetadataOperation`, `CKFetchShareParticipantsOperation` and
/// `CKAcceptSharesOperation`, container-level, against the shares the store keeps
/// (``ShareStorage``).
///
/// A share URL reveals nothing to someone who may not open it: a URL naming no share and a
/// URL of a share the caller is not in (and whose public permission is none) get the same
/// `UNKNOWN_ITEM`.
extension StorageExecutor {
    func runSharingKind(
        _ request: Wire.Open.Request, _ open: Wire.Open, caller: ClientIdentity, stream: OperationStream
    ) async throws -> OperationCompletion {
        guard !open.containerIdentifier.isEmpty else {
            return .failure(.badContainer, "Open names no container")
        }
        switch request {
        case .fetchShareMetadata(let request):
            return try await fetchShareMetadata(request, open.containerIdentifier, caller: caller, stream: stream)
        case .fetchShareParticipants(let request):
            return try await fetchShareParticipants(request, stream: stream)
        case .acceptShares(let request):
            return try await acceptShares(request, open.containerIdentifier, caller: caller, stream: stream)
        default:
            return Self.refusal(of: request)
        }
    }

    /// The error of a share URL the caller may not open, or that names no share.
    static func noShare(_ url: String) -> Wire.OperationError {
        Wire.OperationError(code: .unknownItem, message: "no share at \(url) is open to you")
    }

    /// How the caller sees records outside their own databases: owners by their real names,
    /// their own participant marked, share URLs whole.
    func shareMapping(for caller: ClientIdentity) -> ZoneOwnerMapping {
        ZoneOwnerMapping(
            databaseOwner: caller.userRecordName,
            downloads: self.assets.map { AssetDownloadIssuer(assets: $0, user: caller.userRecordName) },
            caller: caller.userRecordName, shareURLBase: self.shareURLBase)
    }

    private func fetchShareMetadata(
        _ request: Wire.FetchShareMetadataRequest, _ container: String, caller: ClientIdentity, stream: OperationStream
    ) async throws -> OperationCompletion {
        if let refused = Self.tooManyItems(request.shareURLs.count) {
            return refused
        }
        let owners = self.shareMapping(for: caller)
        var errors: [Wire.ItemError] = []
        for url in request.shareURLs {
            var outcome = Wire.ShareMetadataOutcome(shareURL: url)
            if let metadata = try await self.shareMetadata(url, container, request, caller: caller, owners: owners) {
                outcome.outcome = .metadata(metadata)
            } else {
                let error = Self.noShare(url)
                outcome.outcome = .error(error)
                errors.append(Wire.ItemError(item: .shareURL(url), error: error))
            }
            try await stream.emit(.fetchShareMetadata(Wire.FetchShareMetadataEvent(callback: .perShareMetadataResult(outcome))))
        }
        return Self.completion(partialErrors: errors, items: "share URLs")
    }

    /// The metadata of the share at `url` as `caller` sees it; nil when they may not see it.
    private func shareMetadata(
        _ url: String, _ container: String, _ request: Wire.FetchShareMetadataRequest, caller: ClientIdentity,
        owners: ZoneOwnerMapping
    ) async throws -> Wire.ShareMetadata? {
        guard let token = ShareURL.token(in: url), let share = try await storage.share(withToken: token, in: container),
            let standing = share.standing(of: caller.userRecordName)
        else { return nil }
        let database = DatabaseKey.private(container: container, user: share.owner)
        let zoneID = Wire.RecordZoneID(zoneName: share.zoneName, ownerName: share.owner)
        var ids = [Wire.RecordID(recordName: share.recordName, zoneID: zoneID)]
        let rootID = share.rootRecordName.map { Wire.RecordID(recordName: $0, zoneID: zoneID) }
        if let rootID, request.shouldFetchRootRecord { ids.append(rootID) }
        let shareRecord = try await storage.fetchRecords(Array(ids.prefix(1)), desiredKeys: nil, in: database)
        guard case .success(let record)? = shareRecord.first?.result else { return nil }
        var metadata = Wire.ShareMetadata(
            containerIdentifier: container, share: owners.outbound(record),
            hierarchicalRootRecordID: rootID.map(owners.outbound),
            participantRole: Wire.ShareParticipantRole(rawValue: standing.role.rawValue),
            participantStatus: Wire.ShareParticipantAcceptanceStatus(rawValue: standing.status.rawValue),
            participantPermission: Wire.ShareParticipantPermission(rawValue: standing.permission.rawValue),
            ownerIdentity: Wire.UserIdentity(userRecordID: Self.userRecordID(share.owner), hasIcloudAccount: true),
            shareURL: url)
        if let rootID, request.shouldFetchRootRecord {
            let desiredKeys = request.rootRecordDesiredKeysSpecified ? request.rootRecordDesiredKeys : nil
            let root = try await storage.fetchRecords([rootID], desiredKeys: desiredKeys, in: database)
            if case .success(let record)? = root.first?.result { metadata.rootRecord = owners.outbound(record) }
        }
        return metadata
    }

    private func fetchShareParticipants(
        _ request: Wire.FetchShareParticipantsRequest, stream: OperationStream
    ) async throws -> OperationCompletion {
        let infos = request.userIdentityLookupInfos
        if let refused = Self.tooManyItems(infos.count) {
            return refused
        }
        var lookups: [UserLookup?] = []
        for info in infos {
            if case .success(let lookup) = Self.lookup(info) { lookups.append(lookup) } else { lookups.append(nil) }
        }
        let found = try await storage.shareableUsers(matching: lookups.compactMap { $0 })
        var users = found.makeIterator()
        var errors: [Wire.ItemError] = []
        for (info, lookup) in zip(infos, lookups) {
            var outcome = Wire.ShareParticipantOutcome(lookupInfo: info)
            let user = lookup == nil ? nil : users.next() ?? nil
            switch (lookup, user) {
            case (nil, _):
                let error = Wire.OperationError(
                    code: .invalidArguments, message: "a lookup info sets exactly one of email, phone and user record ID")
                outcome.outcome = .error(error)
                errors.append(Wire.ItemError(item: .lookupInfo(info), error: error))
            case (.userRecordName?, nil):
                let error = Wire.OperationError(code: .unknownItem, message: "no user \(info.userRecordID?.recordName ?? "")")
                outcome.outcome = .error(error)
                errors.append(Wire.ItemError(item: .lookupInfo(info), error: error))
            case (_, let user):
                // Someone without an account yet can still be invited by email or phone.
                outcome.outcome = .participant(Wire.ShareParticipant(
                    userIdentity: Wire.UserIdentity(
                        userRecordID: user.map(Self.userRecordID), lookupInfo: info, hasIcloudAccount: user != nil),
                    role: .privateUser, acceptanceStatus: .unspecified, permission: .readOnly))
            }
            try await stream.emit(
                .fetchShareParticipants(Wire.FetchShareParticipantsEvent(callback: .perShareParticipantResult(outcome))))
        }
        return Self.completion(partialErrors: errors, items: "lookup infos")
    }

    private func acceptShares(
        _ request: Wire.AcceptSharesRequest, _ container: String, caller: ClientIdentity, stream: OperationStream
    ) async throws -> OperationCompletion {
        if let refused = Self.tooManyItems(request.shareMetadatas.count) {
            return refused
        }
        let owners = self.shareMapping(for: caller)
        var errors: [Wire.ItemError] = []
        for metadata in request.shareMetadatas {
            let url = metadata.shareURL
            var outcome = Wire.ShareOutcome(shareURL: url)
            if let token = ShareURL.token(in: url),
                let share = try await storage.acceptShare(withToken: token, in: container, by: caller.userRecordName),
                case .success(let record)? = try await storage.fetchRecords(
                    [Wire.RecordID(
                        recordName: share.recordName,
                        zoneID: Wire.RecordZoneID(zoneName: share.zoneName, ownerName: share.owner))],
                    desiredKeys: nil, in: DatabaseKey.private(container: container, user: share.owner)
                ).first?.result
            {
                outcome.outcome = .share(owners.outbound(record))
            } else {
                let error = Self.noShare(url)
                outcome.outcome = .error(error)
                errors.append(Wire.ItemError(item: .shareURL(url), error: error))
            }
            try await stream.emit(.acceptShares(Wire.AcceptSharesEvent(callback: .perShareResult(outcome))))
        }
        return Self.completion(partialErrors: errors, items: "shares")
    }
}
