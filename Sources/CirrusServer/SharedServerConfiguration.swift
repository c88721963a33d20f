/// The server's configuration, made once when the server starts and shared by every connection
/// handler (a handler holding a copy cost each idle connection the whole struct).
final class SharedServerConfiguration: Sendable {
    let configuration: ServerConfiguration
    /// Starts the operations of every connection.
    let router: OperationRouter

    init(_ configuration: ServerConfiguration) {
        self.configuration = configuration
        self.router = OperationRouter(configuration: configuration)
    }
}
