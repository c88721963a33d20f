import CirrusPostgres
import Testing

@Suite("PostgresURL")
struct PostgresURLTests {
    @Test func everyPartIsRead() throws {
        let url = try PostgresURL("postgres://cirrus:s3cret@db.internal:6543/cirrus_prod?sslmode=require")
        #expect(url.host == "db.internal")
        #expect(url.port == 6543)
        #expect(url.user == "cirrus")
        #expect(url.password == "s3cret")
        #expect(url.database == "cirrus_prod")
        #expect(url.tlsMode == .require)
    }

    @Test func defaultsAreLibpqs() throws {
        let url = try PostgresURL("postgresql://alice@localhost")
        #expect(url.port == 5432)
        #expect(url.password == nil)
        #expect(url.database == "alice")
        #expect(url.tlsMode == .prefer)
        let socket = try PostgresURL("postgres://cirrus@localhost/cirrus?host=/run/postgresql&sslmode=disable")
        #expect(socket.host == "/run/postgresql")
    }

    @Test func thePasswordNeverShows() throws {
        let url = try PostgresURL("postgres://cirrus:p%40ss%2Fw0rd@db:5432/cirrus")
        #expect(url.password == "p@ss/w0rd")
        #expect(url.description == "postgres://cirrus:***@db:5432/cirrus")
        #expect(!"\(url)".contains("w0rd"))
        #expect(!String(reflecting: url).contains("w0rd"))
    }

    @Test func badURLsSayWhatIsWrong() {
        let cases: [(String, String)] = [
            ("mysql://a@b/c", "scheme"),
            ("postgres:///cirrus", "no host"),
            ("postgres://a@b:0/c", "out of range"),
            ("postgres://a@b/c/d", "contains '/'"),
            ("postgres://a@b/c?sslmode=verify-full", "sslmode"),
            ("postgres://a@b/c?pool=3", "unknown URL parameter"),
        ]
        for (string, expected) in cases {
            #expect {
                try PostgresURL(string)
            } throws: { error in
                "\(error)".contains(expected)
            }
        }
    }
}
