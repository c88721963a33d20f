import CirrusServer
import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

/// The authorization sweep: for every request kind of the protocol and every identifier it
/// carries, alice sends the request naming what bob really owns and again naming what exists
/// for nobody. The two answers must read the same once the identifiers themselves are set
/// aside (same events, same codes, same messages), and bob's data must be unchanged. Where
/// alice may legitimately reach what she names (public records, her own namespace), the probe
/// says so and checks what she gets. Against a real server: SQLite storage, long-lived
/// operations, mutual TLS on loopback.
@Suite("Authorization sweep", .timeLimit(.minutes(10)))
struct AuthorizationSweepTests {
    /// The request kinds `frame.proto` declares in `Open.request`, as lowercase names without
    /// underscores (so `fetch_long_lived_operation_ids` meets `fetchLongLivedOperationIDs`).
    static func kindsInFrameProto() throws -> Set<String> {
        let path = TestCertificates.directory.dropLast("Certs".count) + "Protos/cirrus/v1/frame.proto"
        let text = try String(contentsOfFile: String(path), encoding: .utf8)
        guard let open = text.range(of: "message Open {"),
            let oneof = text.range(of: "oneof request {", range: open.upperBound..<text.endIndex),
            let end = text.range(of: "}", range: oneof.upperBound..<text.endIndex)
        else { throw SweepSetupFailed(what: "no Open.request oneof in \(path)") }
        var kinds = Set<String>()
        for line in text[oneof.upperBound..<end.lowerBound].split(separator: "\n") {
            let words = line.split(whereSeparator: { $0 == " " })
            guard words.count >= 4, !words[0].hasPrefix("//"), words[2] == "=" else { continue }
            kinds.insert(words[1].replacingOccurrences(of: "_", with: "").lowercased())
        }
        return kinds
    }

    static func normalizedName(_ kind: Wire.Open.Request) -> String { kindName(kind).lowercased() }

    @Test func everyRequestKindOfTheProtocolHasSweepCases() throws {
        let declared = try Self.kindsInFrameProto()
        #expect(declared.count >= 26, "parsed \(declared)")
        let swept = Set(Self.allKinds.map(Self.normalizedName))
        #expect(swept.count == Self.allKinds.count, "a kind is listed twice")
        #expect(declared.subtracting(swept).isEmpty, "kinds of frame.proto without sweep cases")
        #expect(swept.subtracting(declared).isEmpty, "sweep kinds frame.proto does not declare")
        for kind in Self.allKinds {
            let probes = Self.probes(for: kind)
            #expect(!probes.isEmpty, "no probe for \(Self.kindName(kind))")
            for probe in probes {
                let built = probe.request(SweepWorld.placeholderIdentifiers)
                #expect(Self.kindName(built) == Self.kindName(kind), "probe \(probe.name) builds another kind")
            }
        }
    }

    @Test func anotherUsersIdentifiersAreRefusedExactlyLikeIdentifiersOfNobody() async throws {
        try await withLongLivedServer { harness in
            var bob = try await SweepClient.connect(port: harness.port, user: "bob")
            var alice = try await SweepClient.connect(port: harness.port, user: "alice")
            let world = try await SweepWorld.build(bob: &bob, alice: &alice)
            let before = try await world.snapshot(&bob)
            let theirs = world.bob
            let nobodys = theirs.unknownCounterpart

            // Resume (a frame, not a request) first: later probes give alice an operation of
            // her own under bob's operation ID.
            let resumed = try await alice.resume(theirs.operationID)
            let resumedUnknown = try await alice.resume(nobodys.operationID)
            #expect(!resumed.persisted, "alice attached to bob's long-lived operation")
            #expect(resumed.complete?.error != nil, "alice resumed bob's operation: \(resumed)")
            #expect(resumed.normalized(theirs) == resumedUnknown.normalized(nobodys), "Resume of bob's operation")

            var sent = 0
            for kind in Self.allKinds {
                for probe in Self.probes(for: kind) {
                    let label = "\(Self.kindName(kind)): \(probe.name)"
                    switch probe.expectation {
                    case .indistinguishable:
                        let answer = try await alice.send(probe, with: theirs)
                        let control = try await alice.send(probe, with: nobodys)
                        let (bobs, unknown) = (answer.normalized(theirs), control.normalized(nobodys))
                        #expect(
                            bobs == unknown,
                            "\(label) — bob's identifiers answer differently from nobody's:\n\(bobs)\n\(unknown)")
                        sent += 2
                    case .legitimate(let reason, let check):
                        let answer = try await alice.send(probe, with: theirs)
                        if let problem = check(answer, theirs) {
                            Issue.record("\(label) (\(reason)): \(problem); \(answer)")
                        }
                        sent += 1
                    }
                }
            }
            #expect(sent > 60, "the sweep sent \(sent) requests")

            // Operation IDs are unique per user: a long-lived operation alice opens under bob's
            // ID is her own, exactly as under an ID of nobody (last: from here on alice has one).
            let ownNamespace = SweepProbe(
                "open a long-lived operation under their operation ID", isLongLived: true, operationID: { $0.operationID }
            ) { ids in .fetchRecords(.init(recordIDs: [recordID(ids.defaultRecord)])) }
            let opened = try await alice.send(ownNamespace, with: theirs)
            let openedUnknown = try await alice.send(ownNamespace, with: nobodys)
            #expect(opened.persisted && opened.complete != nil, "alice's own operation: \(opened)")
            #expect(opened.normalized(theirs) == openedUnknown.normalized(nobodys), "Open under bob's operation ID")

            let after = try await world.snapshot(&bob)
            for (index, (old, new)) in zip(before, after).enumerated() where old != new {
                Issue.record("bob's data changed (read \(index)):\nbefore: \(old)\nafter:  \(new)")
            }
            await alice.client.close()
            await bob.client.close()
        }
    }
}
