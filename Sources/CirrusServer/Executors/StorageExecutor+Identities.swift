import CirrusStore
import CirrusWire

/// The user identity kinds: `CKContainer.fetchUserRecordID`, `accountStatus`, the
/// `userDiscoverability` permission, `CKDiscoverUserIdentitiesOperation` and
/// `CKDiscoverAllUserIdentitiesOperation`, against the user directory (``UserStorage``).
///
/// Discovery finds only users who granted discoverability in the container and are enabled;
/// a lookup that finds anyone else produces no event, exactly as one that finds nobody.
extension StorageExecutor {
    /// Users read per page of `CKDiscoverAllUserIdentitiesOperation` (each one event).
    static let discoveryPageSize = 100

    func runIdentityKind(
        _ request: Wire.Open.Request, _ open: Wire.Open, caller: ClientIdentity, stream: OperationStream
    ) async throws -> OperationCompletion {
        guard !open.containerIdentifier.isEmpty else {
            return .failure(.badContainer, "Open names no container")
        }
        switch request {
        case .fetchUserRecordID:
            try await users.register(caller)
            try await ensureUsersRecord(of: caller, in: open.containerIdentifier)
            let id = Wire.RecordID(recordName: caller.userRecordName, zoneID: Self.defaultZone)
            return .success(.fetchUserRecordID(Wire.FetchUserRecordIDResult(userRecordID: id)))
        case .accountStatus:
            return .success(.accountStatus(Wire.AccountStatusResult(status: try await accountStatus(of: caller))))
        case .applicationPermission(let request):
            return try await applicationPermission(request, open, caller: caller)
        case .discoverUserIdentities(let request):
            return try await discoverUserIdentities(request, open, stream: stream)
        case .discoverAllUserIdentities:
            return try await discoverAllUserIdentities(open, caller: caller, stream: stream)
        case .fetchWebAuthToken(let request):
            return try await fetchWebAuthToken(request, open, caller: caller)
        default:
            return Self.refusal(of: request)
        }
    }

    /// Creates the caller's `Users` record in the container's public database unless it
    /// exists (record name = user record name, default zone): readable by all, written only by
    /// its user (the store refuses everyone else), never deleted.
    private func ensureUsersRecord(of caller: ClientIdentity, in container: String) async throws {
        guard !users.hasUsersRecord(caller.userRecordName, in: container) else { return }
        let database = DatabaseKey.public(container: container)
        var record = Wire.Record()
        record.recordID = Wire.RecordID(recordName: caller.userRecordName, zoneID: Self.defaultZone)
        record.recordType = "Users"
        let result = try await storage.modifyRecords(
            RecordModification(saving: [ZoneOwnerMapping(databaseOwner: database.owner).inbound(record)]),
            in: database, by: caller.userRecordName)
        switch result.saves.first?.result {
        case .success?:
            break
        case .failure(let failure)? where failure.code == .serverRecordChanged:
            break  // It exists.
        case .failure(let failure)?:
            logger.error("could not create the Users record of \(caller.userRecordName): \(failure)")
            return
        case nil:
            return
        }
        users.rememberUsersRecord(caller.userRecordName, in: container)
    }

    /// The default zone of user record IDs (`_defaultZone`, owned by the current user).
    static var defaultZone: Wire.RecordZoneID {
        Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: ZoneOwnerMapping.currentUser)
    }

    private func accountStatus(of caller: ClientIdentity) async throws -> Wire.AccountStatus {
        if users.isShuttingDown { return .temporarilyUnavailable }
        try await users.register(caller)
        guard let user = try await storage.user(caller.userRecordName), !user.isDisabled else { return .noAccount }
        return .available
    }

    private func applicationPermission(
        _ request: Wire.ApplicationPermissionRequest, _ open: Wire.Open, caller: ClientIdentity
    ) async throws -> OperationCompletion {
        guard request.permission == .userDiscoverability else {
            return .failure(.invalidArguments, "unknown application permission \(request.permission.rawValue)")
        }
        try await users.register(caller)
        let container = open.containerIdentifier
        switch request.action {
        case .unspecified, .status:
            break
        case .request:
            try await storage.setDiscoverability(.granted, of: caller.userRecordName, in: container)
        case .revoke:
            try await storage.setDiscoverability(.denied, of: caller.userRecordName, in: container)
        case .unrecognized(let value):
            return .failure(.invalidArguments, "unknown application permission action \(value)")
        }
        let status: Wire.ApplicationPermissionStatus =
            switch try await storage.discoverability(of: caller.userRecordName, in: container) {
            case nil: .unspecified
            case .denied: .denied
            case .granted: .granted
            }
        return .success(.applicationPermission(Wire.ApplicationPermissionResult(status: status)))
    }

    private func discoverUserIdentities(
        _ request: Wire.DiscoverUserIdentitiesRequest, _ open: Wire.Open, stream: OperationStream
    ) async throws -> OperationCompletion {
        let infos = request.userIdentityLookupInfos
        if let refused = Self.tooManyItems(infos.count) {
            return refused
        }
        var lookups: [UserLookup] = []
        lookups.reserveCapacity(infos.count)
        for (index, info) in infos.enumerated() {
            switch Self.lookup(info) {
            case .success(let lookup): lookups.append(lookup)
            case .failure(let reason): return .failure(.invalidArguments, "lookup info \(index): \(reason)")
            }
        }
        // A page at a time, so identities stream as they are found.
        var start = 0
        while start < lookups.count {
            let end = min(start + Self.discoveryPageSize, lookups.count)
            let found = try await storage.discoverUsers(matching: Array(lookups[start..<end]), in: open.containerIdentifier)
            let events = zip(infos[start..<end], found).compactMap { info, user -> Wire.Event.Payload? in
                guard let user else { return nil }
                let discovered = Wire.UserIdentityDiscovered(identity: Self.identity(user, lookupInfo: info), lookupInfo: info)
                return .discoverUserIdentities(Wire.DiscoverUserIdentitiesEvent(callback: .userIdentityDiscovered(discovered)))
            }
            try await stream.emit(contentsOf: events)
            start = end
        }
        return .success()
    }

    private func discoverAllUserIdentities(
        _ open: Wire.Open, caller: ClientIdentity, stream: OperationStream
    ) async throws -> OperationCompletion {
        var after: String?
        while true {
            let page = try await storage.discoverableUsers(
                in: open.containerIdentifier, after: after, limit: Self.discoveryPageSize)
            let events = page.filter { $0.name != caller.userRecordName }.map { user -> Wire.Event.Payload in
                let info = user.emailAddresses.first.map { Wire.UserIdentityLookupInfo(emailAddress: $0) }
                    ?? Wire.UserIdentityLookupInfo(userRecordID: Self.userRecordID(user.name))
                return .discoverAllUserIdentities(
                    Wire.DiscoverAllUserIdentitiesEvent(callback: .userIdentityDiscovered(Self.identity(user, lookupInfo: info))))
            }
            try await stream.emit(contentsOf: events)
            guard page.count == Self.discoveryPageSize, let last = page.last else { return .success() }
            after = last.name
        }
    }

    /// `CKFetchWebAuthTokenOperation`: a bearer token for the caller, valid for the directory's
    /// `webAuthTokenLifetime`, that another client presents in `Hello`. Only a caller who
    /// authenticated otherwise (a certificate) gets one, so a token cannot renew itself.
    private func fetchWebAuthToken(
        _ request: Wire.FetchWebAuthTokenRequest, _ open: Wire.Open, caller: ClientIdentity
    ) async throws -> OperationCompletion {
        guard !request.apiToken.isEmpty else {
            return .failure(.invalidArguments, "FetchWebAuthToken names no API token")
        }
        guard caller.tokenID == nil else {
            return .failure(.permissionFailure, "a client authenticated by a bearer token cannot fetch another")
        }
        let active = users.webAuthTokenCount(of: caller.userRecordName)
        guard active < UserDirectory.maximumWebAuthTokensPerUser else {
            return .failure(
                .limitExceeded,
                "\(active) web auth tokens are valid; at most \(UserDirectory.maximumWebAuthTokensPerUser) at once")
        }
        let (issued, _) = try await users.issueToken(
            for: caller.userRecordName, label: "\(UserDirectory.webAuthTokenLabel) (\(open.containerIdentifier.prefix(128)))",
            lifetime: users.webAuthTokenLifetime)
        return .success(.fetchWebAuthToken(Wire.FetchWebAuthTokenResult(webAuthToken: issued.token)))
    }

    /// `info` as a directory lookup, or why it is not one: exactly one of its three parts set,
    /// and well formed.
    static func lookup(_ info: Wire.UserIdentityLookupInfo) -> Result<UserLookup, LookupRefusal> {
        let parts = [!info.emailAddress.isEmpty, !info.phoneNumber.isEmpty, info.userRecordID != nil].filter { $0 }
        guard parts.count == 1 else {
            return .failure(LookupRefusal(reason: "set exactly one of email address, phone number, user record ID"))
        }
        if !info.emailAddress.isEmpty {
            guard UserLookup.normalizedEmail(info.emailAddress) != nil else {
                return .failure(LookupRefusal(reason: "'\(info.emailAddress.prefix(64))' is not an email address"))
            }
            return .success(.email(info.emailAddress))
        }
        if !info.phoneNumber.isEmpty {
            guard UserLookup.normalizedPhone(info.phoneNumber) != nil else {
                return .failure(LookupRefusal(reason: "'\(info.phoneNumber.prefix(32))' is not a phone number"))
            }
            return .success(.phone(info.phoneNumber))
        }
        guard let id = info.userRecordID, UserLookup.isValidUserRecordName(id.recordName) else {
            return .failure(LookupRefusal(reason: "a user record name looks like _alice"))
        }
        if let zone = id.zoneID, zone.zoneName != "_defaultZone" {
            return .failure(LookupRefusal(reason: "user record IDs are in the default zone, not \(zone.zoneName.prefix(64))"))
        }
        return .success(.userRecordName(id.recordName))
    }

    struct LookupRefusal: Error {
        let reason: String
    }

    static func userRecordID(_ name: String) -> Wire.RecordID {
        Wire.RecordID(recordName: name, zoneID: defaultZone)
    }

    /// What others see of `user`: its record ID and, when set, its name.
    static func identity(_ user: DirectoryUser, lookupInfo: Wire.UserIdentityLookupInfo) -> Wire.UserIdentity {
        Wire.UserIdentity(
            userRecordID: userRecordID(user.name), lookupInfo: lookupInfo, nameComponents: user.nameComponents,
            hasIcloudAccount: true)
    }
}
