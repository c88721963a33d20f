import ArgumentParser
import CirrusStore
import CirrusWire
import Foundation

/// `cirrusd users …`: the user directory of a data directory, changed while `cirrusd` runs
/// (SQLite in WAL mode takes the second writer; the server notices disabled users within its
/// `--user-refresh-interval` and closes their connections).
struct UsersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "users",
        abstract: "List and change the users of a Cirrus data directory (works while cirrusd runs).",
        discussion: """
            Users are named as their certificate's subject CN (alice) or as user record names (_alice).
            A user who connects is registered by the server; `add` registers one ahead of time.
            """,
        subcommands: [
            List.self, Add.self, Disable.self, Enable.self, AddEmail.self, RemoveEmail.self, AddPhone.self,
            RemovePhone.self, SetName.self,
        ]
    )

    struct UserArgument: ParsableArguments {
        @Argument(help: "The user: alice or _alice.")
        var user: String

        var recordName: String {
            get throws {
                let name = user.hasPrefix("_") ? user : "_" + user
                guard UserLookup.isValidUserRecordName(name) else {
                    throw ValidationError("'\(user)' is not a user name: 1…128 letters, digits, '.', '-', '_', '@'")
                }
                return name
            }
        }
    }

    /// Runs `change` on the storage of `location`, closing it after, and prints the user.
    static func change(
        _ location: StorageLocation, _ user: UserArgument, _ change: DirectoryUserChange
    ) async throws {
        let name = try user.recordName
        try await withStorage(location) { storage in
            let updated = try await storage.updateUser(name, change, at: SQLiteStorage.systemClock())
            print(Self.describe(updated))
        }
    }

    static func withStorage(
        _ location: StorageLocation, _ body: (any UserStorage & TokenStorage) async throws -> Void
    ) async throws {
        let storage = try await location.openDirectory()
        do {
            try await body(storage.directory)
        } catch let error as StoreError {
            try? await storage.close()
            throw ValidationError(error.message)
        } catch {
            try? await storage.close()
            throw error
        }
        try await storage.close()
    }

    static func describe(_ user: DirectoryUser) -> String {
        var parts = [user.name, user.isDisabled ? "disabled" : "enabled"]
        if !user.emailAddresses.isEmpty { parts.append("email=" + user.emailAddresses.joined(separator: ",")) }
        if !user.phoneNumbers.isEmpty { parts.append("phone=" + user.phoneNumbers.joined(separator: ",")) }
        if let name = user.nameComponents {
            let full = [name.givenName, name.familyName].filter { !$0.isEmpty }.joined(separator: " ")
            if !full.isEmpty { parts.append("name=\"\(full)\"") }
        }
        if let seen = user.lastSeenAt {
            let date = Date(timeIntervalSince1970: Double(seen.seconds))
            parts.append("last-seen=" + ISO8601DateFormatter().string(from: date))
        }
        return parts.joined(separator: "  ")
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List every user, one per line.")
        @OptionGroup var location: StorageLocation

        func run() async throws {
            try await UsersCommand.withStorage(location) { storage in
                for user in try await storage.allUsers() {
                    print(UsersCommand.describe(user))
                }
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Register a user before they first connect.")
        @OptionGroup var location: StorageLocation
        @OptionGroup var user: UserArgument

        func run() async throws {
            let name = try user.recordName
            try await UsersCommand.withStorage(location) { storage in
                print(UsersCommand.describe(try await storage.createUser(name, at: SQLiteStorage.systemClock())))
            }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Disable a user: their connections close and new ones are refused.")
        @OptionGroup var location: StorageLocation
        @OptionGroup var user: UserArgument

        func run() async throws { try await UsersCommand.change(location, user, .setDisabled(true)) }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Enable a disabled user again.")
        @OptionGroup var location: StorageLocation
        @OptionGroup var user: UserArgument

        func run() async throws { try await UsersCommand.change(location, user, .setDisabled(false)) }
    }

    struct AddEmail: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add an email address others may look the user up by.")
        @OptionGroup var location: StorageLocation
        @OptionGroup var user: UserArgument
        @Argument(help: "The email address.") var email: String

        func run() async throws { try await UsersCommand.change(location, user, .addEmail(email)) }
    }

    struct RemoveEmail: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove one of the user's email addresses.")
        @OptionGroup var location: StorageLocation
        @OptionGroup var user: UserArgument
        @Argument(help: "The email address.") var email: String

        func run() async throws { try await UsersCommand.change(location, user, .removeEmail(email)) }
    }

    struct AddPhone: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a phone number others may look the user up by.")
        @OptionGroup var location: StorageLocation
        @OptionGroup var user: UserArgument
        @Argument(help: "The phone number, e.g. +15551234567.") var phone: String

        func run() async throws { try await UsersCommand.change(location, user, .addPhone(phone)) }
    }

    struct RemovePhone: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove one of the user's phone numbers.")
        @OptionGroup var location: StorageLocation
        @OptionGroup var user: UserArgument
        @Argument(help: "The phone number.") var phone: String

        func run() async throws { try await UsersCommand.change(location, user, .removePhone(phone)) }
    }

    struct SetName: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set the name discovered users show (no options: clear it).")
        @OptionGroup var location: StorageLocation
        @OptionGroup var user: UserArgument
        @Option(help: "Given name.") var given: String?
        @Option(help: "Family name.") var family: String?
        @Option(help: "Nickname.") var nickname: String?

        func run() async throws {
            var components = Wire.UserNameComponents()
            components.givenName = given ?? ""
            components.familyName = family ?? ""
            components.nickname = nickname ?? ""
            let isEmpty = given == nil && family == nil && nickname == nil
            try await UsersCommand.change(location, user, .setName(isEmpty ? nil : components))
        }
    }
}
