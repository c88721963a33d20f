import CirrusWire
import Foundation

/// A query condition in CloudKit's predicate language, parsed from a format string, standing
/// in for `NSPredicate` (whose `init(format:)` does not exist on Linux).
///
/// `init(format:_:)` never throws, so code written for `NSPredicate(format:…)` compiles with
/// only the type name changed: it records the parse result, and an operation that uses an
/// invalid predicate fails with `CKError(.invalidArguments)` before anything is sent. Use
/// `init(parsing:_:)` to get the error at once.
///
/// The supported grammar is CloudKit's subset: `==` (`=`), `!=` (`<>`), `<`, `<=`, `>`, `>=`,
/// `BEGINSWITH`, `IN`, `CONTAINS` (membership in a list field), `BETWEEN`, `AND` (`&&`),
/// `NOT` (`!`), parentheses, `TRUEPREDICATE`, `FALSEPREDICATE`, full-text
/// `self CONTAINS 'words'` and `distanceToLocation:fromLocation:(key, %@) < kilometers`.
/// Placeholders: `%@` (any value), `%K` (a key name), `%d`/`%i`/`%ld`/`%lld`/`%u`/`%lu`
/// (integers), `%f`/`%lf`/`%g` (floating point). `OR`, key paths, `ANY`/`ALL`, `LIKE`,
/// `MATCHES`, `ENDSWITH` and `[c]`-style options are refused, as CloudKit refuses them.
///
/// For example:
/// ```swift
/// let predicate = CKPredicate(format: "category == %@ AND createdAt > %@", "work", oneWeekAgo)
/// let query = CKQuery(recordType: "Note", predicate: predicate)
/// let strict = try CKPredicate(parsing: "priority > %d", 5)
/// ```
public struct CKPredicate: Sendable, Hashable, CustomStringConvertible {
    /// The format string the predicate was made from (`"TRUEPREDICATE"` / `"FALSEPREDICATE"`
    /// for `init(value:)`).
    public let predicateFormat: String
    private let parsed: Result<Wire.QueryPredicate, ParseError>

    /// A predicate from a format string and its arguments; never throws.
    ///
    /// An invalid format is kept with its `parseError`; an operation using the predicate
    /// fails with `CKError(.invalidArguments)` naming it.
    public init(format predicateFormat: String, _ arguments: Any...) {
        self.init(format: predicateFormat, argumentArray: arguments)
    }

    /// A predicate from a format string and an array of arguments (`NSPredicate`'s
    /// `init(format:argumentArray:)`); never throws, like `init(format:_:)`.
    public init(format predicateFormat: String, argumentArray arguments: [Any]?) {
        self.predicateFormat = predicateFormat
        var parser = PredicateParser(format: predicateFormat, arguments: arguments ?? [])
        self.parsed = Result { () throws(ParseError) in try parser.parse() }
    }

    /// A predicate from a format string and its arguments, or the reason it is invalid.
    ///
    /// For example:
    /// ```swift
    /// let predicate = try CKPredicate(parsing: "title BEGINSWITH %@", "Shop")
    /// ```
    ///
    /// - throws: `CKPredicate.ParseError` naming the position and what was expected.
    public init(parsing predicateFormat: String, _ arguments: Any...) throws(ParseError) {
        try self.init(parsing: predicateFormat, argumentArray: arguments)
    }

    /// A predicate from a format string and an array of arguments, or the reason it is invalid.
    ///
    /// - throws: `CKPredicate.ParseError` naming the position and what was expected.
    public init(parsing predicateFormat: String, argumentArray arguments: [Any]) throws(ParseError) {
        self.init(format: predicateFormat, argumentArray: arguments)
        if let error = self.parseError { throw error }
    }

    /// `TRUEPREDICATE` (every record of the type) or `FALSEPREDICATE` (none).
    public init(value: Bool) {
        self.predicateFormat = value ? "TRUEPREDICATE" : "FALSEPREDICATE"
        let node: Wire.QueryPredicate.Node =
            value ? .truePredicate(Wire.TruePredicate()) : .falsePredicate(Wire.FalsePredicate())
        self.parsed = .success(Wire.QueryPredicate(format: predicateFormat, node: node))
    }

    /// The predicate a wire message carries, as the server sent it; `predicateFormat` is the
    /// root node's `format` (possibly empty). An absent node is `TRUEPREDICATE`, as for a
    /// query without a predicate.
    package init(wire: Wire.QueryPredicate) {
        self.predicateFormat = wire.format
        var tree = wire
        if tree.node == nil { tree.node = .truePredicate(Wire.TruePredicate()) }
        self.parsed = .success(tree)
    }

    /// Why the format string is not a valid CloudKit predicate; nil when it is.
    public var parseError: ParseError? {
        if case .failure(let error) = parsed { return error }
        return nil
    }

    /// The predicate as a wire tree; the root's `format` is `predicateFormat`.
    ///
    /// - throws: `CKPredicate.ParseError` when the format string is invalid.
    package var wirePredicate: Wire.QueryPredicate {
        get throws(ParseError) { try parsed.get() }
    }

    /// ``wirePredicate`` for the fuzz targets, a package of their own (`Fuzz/`), which reach it
    /// with `@_spi(CirrusTools) import CirrusModel`; no program importing CirrusKit sees it.
    @_spi(CirrusTools) public var toolsWirePredicate: Wire.QueryPredicate {
        get throws(ParseError) { try self.wirePredicate }
    }

    public var description: String { predicateFormat }
}
