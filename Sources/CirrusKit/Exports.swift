// `import CirrusKit` is all a program writes, as `import CloudKit` is on Apple platforms: the
// CloudKit types (`CKRecord`, `CKRecordZone`, `CKQuery`, `CKError` …) live in CirrusModel,
// and CloudKit code uses Foundation (`Date`, `Data`, `URL`) without importing it either.
// swift-log comes along for `CirrusClientConfiguration.logger` (`Logger`, `StreamLogHandler`).
@_exported public import CirrusModel
@_exported public import Foundation
@_exported public import Logging
