import Foundation
import GRDB

/// Distances on Earth for `distanceToLocation:fromLocation:` and location
/// sorts: great-circle (haversine) distance on a sphere of Earth's mean radius.
enum QueryGeometry {
    /// Earth's mean radius in meters (IUGG).
    static let earthRadius = 6_371_008.8

    /// Meters between two points given in degrees.
    static func distance(_ latitude1: Double, _ longitude1: Double, _ latitude2: Double, _ longitude2: Double) -> Double {
        let φ1 = latitude1 * .pi / 180
        let φ2 = latitude2 * .pi / 180
        let Δφ = (latitude2 - latitude1) * .pi / 180
        let Δλ = (longitude2 - longitude1) * .pi / 180
        let s1 = sin(Δφ / 2)
        let s2 = sin(Δλ / 2)
        let a = min(1, max(0, s1 * s1 + cos(φ1) * cos(φ2) * s2 * s2))
        return 2 * earthRadius * atan2(a.squareRoot(), (1 - a).squareRoot())
    }

    /// Meters between two points, nil unless both have a latitude in
    /// -90 ... 90 and a longitude in -180 ... 180 (a stored location outside
    /// them is no place on Earth and is at no distance from anything).
    static func distanceOnEarth(
        _ latitude1: Double, _ longitude1: Double, _ latitude2: Double, _ longitude2: Double
    ) -> Double? {
        guard (-90.0...90.0).contains(latitude1), (-180.0...180.0).contains(longitude1),
            (-90.0...90.0).contains(latitude2), (-180.0...180.0).contains(longitude2)
        else { return nil }
        return distance(latitude1, longitude1, latitude2, longitude2)
    }

    /// Degrees of latitude and longitude that hold every point within
    /// `radius` meters of a point (a little more, never less): one latitude
    /// range and one or two longitude ranges (two across the antimeridian);
    /// no longitude ranges = every longitude.
    struct BoundingBox: Sendable, Hashable {
        var latitude: ClosedRange<Double>
        var longitudes: [ClosedRange<Double>]
    }

    static func boundingBox(latitude: Double, longitude: Double, radius: Double) -> BoundingBox {
        // Rounding must only widen the box.
        let δ = (radius * 1.000_001 + 1) / earthRadius
        let φ = latitude * .pi / 180
        let λ = longitude * .pi / 180
        let degrees = 180 / Double.pi
        guard δ < .pi else { return BoundingBox(latitude: -90...90, longitudes: []) }
        let low = φ - δ
        let high = φ + δ
        guard low > -.pi / 2, high < .pi / 2 else {
            // A pole is inside the circle: every longitude.
            return BoundingBox(latitude: max(low, -.pi / 2) * degrees...min(high, .pi / 2) * degrees, longitudes: [])
        }
        let ratio = sin(δ) / cos(φ)
        guard ratio < 1 else { return BoundingBox(latitude: low * degrees...high * degrees, longitudes: []) }
        let Δλ = asin(ratio)
        let west = λ - Δλ
        let east = λ + Δλ
        let longitudes: [ClosedRange<Double>]
        if west < -.pi {
            longitudes = [(west + 2 * .pi) * degrees...180, -180...east * degrees]
        } else if east > .pi {
            longitudes = [west * degrees...180, -180...(east - 2 * .pi) * degrees]
        } else {
            longitudes = [west * degrees...east * degrees]
        }
        return BoundingBox(latitude: low * degrees...high * degrees, longitudes: longitudes)
    }

    /// `cirrus_distance(lat1, lon1, lat2, lon2)`: meters, NULL when an
    /// argument is NULL or not on Earth (``distanceOnEarth(_:_:_:_:)``).
    /// Registered on every connection of the store.
    static let sqlFunction = DatabaseFunction("cirrus_distance", argumentCount: 4, pure: true) { arguments in
        let values = arguments.map { Double.fromDatabaseValue($0) }
        guard values.count == 4, let a = values[0], let b = values[1], let c = values[2], let d = values[3] else {
            return nil
        }
        return distanceOnEarth(a, b, c, d)
    }
}
