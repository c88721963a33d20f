// `import CirrusKit` is all a program writes, as `import CloudKit` is on Apple platforms: the
// CloudKit types (`CKRecord`, `CKRecordZone`, `CKQuery`, `CKError` …) live in CirrusModel,
// and CloudKit code uses Foundation (`Date`, `Data`, `URL`) without importing it either.
@_exported public import CirrusModel
@_exported public import Foundation
