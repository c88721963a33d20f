import CirrusCLI
import Foundation

/// What the CSV and JSON Lines targets share: a file's text through `cirrus import`'s reading
/// (parsing, type inference, record names) and record building, once as `cirrus import` reads
/// it with no options and once with an ID field and declared field types.
public enum ImportFuzzing {
    /// Where relative asset paths start: an empty directory, so no asset file exists.
    static let baseDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-fuzz-import-none")

    public static func run(_ text: String, format: ImportFormat) {
        var plain = ImportOptions()
        plain.format = format
        var declared = plain
        declared.recordType = "Note"
        declared.idField = "id"
        declared.fields = [
            FieldSpecification(name: "tags", type: .list(.string)),
            FieldSpecification(name: "place", type: .location),
            FieldSpecification(name: "due", type: .date),
            FieldSpecification(name: "blob", type: .bytes),
            FieldSpecification(name: "folder", type: .reference),
            FieldSpecification(name: "file", type: .asset),
        ]
        for options in [plain, declared] {
            let source = ImportSource(text: text, options: options, importID: "fuzz", baseDirectory: self.baseDirectory)
            for row in source.rows {
                _ = try? source.record(for: row)
            }
            _ = source.inferredTypes
        }
    }
}
