import CirrusWire

extension Wire.Open.Request {
    /// The operation kind as a metric label: the request's case in snake case.
    var metricLabel: String {
        switch self {
        case .modifyRecords: "modify_records"
        case .fetchRecords: "fetch_records"
        case .query: "query"
        case .modifyRecordZones: "modify_record_zones"
        case .fetchRecordZones: "fetch_record_zones"
        case .fetchRecordZoneChanges: "fetch_record_zone_changes"
        case .fetchDatabaseChanges: "fetch_database_changes"
        case .modifySubscriptions: "modify_subscriptions"
        case .fetchSubscriptions: "fetch_subscriptions"
        case .fetchNotificationChanges: "fetch_notification_changes"
        case .markNotificationsRead: "mark_notifications_read"
        case .modifyBadge: "modify_badge"
        case .fetchShareMetadata: "fetch_share_metadata"
        case .fetchShareParticipants: "fetch_share_participants"
        case .acceptShares: "accept_shares"
        case .discoverUserIdentities: "discover_user_identities"
        case .discoverAllUserIdentities: "discover_all_user_identities"
        case .fetchWebAuthToken: "fetch_web_auth_token"
        case .watchNotifications: "watch_notifications"
        case .uploadAsset: "upload_asset"
        case .downloadAsset: "download_asset"
        case .fetchLongLivedOperationIDs: "fetch_long_lived_operation_i_ds"
        case .fetchLongLivedOperation: "fetch_long_lived_operation"
        case .fetchUserRecordID: "fetch_user_record_i_d"
        case .accountStatus: "account_status"
        case .applicationPermission: "application_permission"
        }
    }
}
