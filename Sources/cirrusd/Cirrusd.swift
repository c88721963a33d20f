import ArgumentParser
import CirrusServer

@main
struct Cirrusd: AsyncParsableCommand {
    func run() async throws {}
}
