/// The keys a predicate or sort descriptor may name: field names and CloudKit's system keys.
enum PredicateKey {
    /// What a key holds, when the system defines it.
    enum SystemKind {
        /// `recordID`, `creatorUserRecordID`, `lastModifiedUserRecordID`: compared with
        /// references (`CKRecord.ID` or `CKRecord.Reference`).
        case reference
        /// `creationDate`, `modificationDate`: compared with dates.
        case date
    }

    /// The system keys by the name the wire uses, and what they hold.
    static let systemKeys: [String: SystemKind] = [
        "recordID": .reference,
        "creatorUserRecordID": .reference,
        "lastModifiedUserRecordID": .reference,
        "creationDate": .date,
        "modificationDate": .date,
    ]

    /// `CKRecord.SystemFieldKey` spellings and the wire names they stand for.
    static let systemAliases: [String: String] = [
        CKRecord.SystemFieldKey.recordID: "recordID",
        CKRecord.SystemFieldKey.creatorUserRecordID: "creatorUserRecordID",
        CKRecord.SystemFieldKey.lastModifiedUserRecordID: "lastModifiedUserRecordID",
        CKRecord.SystemFieldKey.creationDate: "creationDate",
        CKRecord.SystemFieldKey.modificationDate: "modificationDate",
    ]

    /// The longest key CloudKit accepts.
    static let maximumLength = 255

    /// The key as the wire names it (system aliases resolved), or why it is not a key.
    static func canonical(_ name: String) -> Result<String, ArgumentProblem> {
        if name.isEmpty { return .failure(ArgumentProblem(message: "a key cannot be empty")) }
        if name.contains(".") {
            return .failure(ArgumentProblem(message: "key paths (\(name)) are not supported by CloudKit; use a field name"))
        }
        let valid = name.utf8.allSatisfy { byte in
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_")
        }
        let startsWithDigit = name.utf8.first.map { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") } ?? false
        guard valid, !startsWithDigit else {
            return .failure(
                ArgumentProblem(
                    message: "\"\(name)\" is not a key: keys are letters, digits and underscores, not starting with a digit"))
        }
        guard name.utf8.count <= maximumLength else {
            return .failure(ArgumentProblem(message: "a key is at most \(maximumLength) characters long"))
        }
        return .success(systemAliases[name] ?? name)
    }
}
