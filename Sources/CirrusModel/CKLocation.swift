import Foundation

/// A geographic location stored in a record field, standing in for `CLLocation`
/// (CoreLocation does not exist on Linux; there `CLLocation` is an alias of this type).
///
/// Negative accuracies, course and speed mean "invalid", as in `CLLocation`.
///
/// For example:
/// ```swift
/// store["location"] = CKLocation(latitude: 47.3769, longitude: 8.5417)
/// ```
public struct CKLocation: Hashable, Sendable, CustomStringConvertible {
    /// A latitude/longitude pair in degrees (WGS 84), like `CLLocationCoordinate2D`.
    public struct Coordinate: Hashable, Sendable {
        public var latitude: Double
        public var longitude: Double
        public init(latitude: Double, longitude: Double) {
            self.latitude = latitude
            self.longitude = longitude
        }
    }

    /// Latitude and longitude in degrees.
    public var coordinate: Coordinate
    /// Meters above sea level.
    public var altitude: Double
    /// Radius of uncertainty of `coordinate` in meters; negative = invalid.
    public var horizontalAccuracy: Double
    /// Uncertainty of `altitude` in meters; negative = invalid.
    public var verticalAccuracy: Double
    /// Degrees from true north, 0 … 359.9; negative = invalid.
    public var course: Double
    /// Uncertainty of `course` in degrees; negative = invalid.
    public var courseAccuracy: Double
    /// Meters per second; negative = invalid.
    public var speed: Double
    /// Uncertainty of `speed` in meters per second; negative = invalid.
    public var speedAccuracy: Double
    /// When the location was determined.
    public var timestamp: Date

    /// Latitude in degrees.
    public var latitude: Double { coordinate.latitude }
    /// Longitude in degrees.
    public var longitude: Double { coordinate.longitude }

    /// A location with every property given (the `CLLocation` designated initialiser).
    public init(
        coordinate: Coordinate,
        altitude: Double,
        horizontalAccuracy: Double,
        verticalAccuracy: Double,
        course: Double,
        courseAccuracy: Double,
        speed: Double,
        speedAccuracy: Double,
        timestamp: Date
    ) {
        self.coordinate = coordinate
        self.altitude = altitude
        self.horizontalAccuracy = horizontalAccuracy
        self.verticalAccuracy = verticalAccuracy
        self.course = course
        self.courseAccuracy = courseAccuracy
        self.speed = speed
        self.speedAccuracy = speedAccuracy
        self.timestamp = timestamp
    }

    /// A location with course and speed but no accuracies for them.
    public init(
        coordinate: Coordinate,
        altitude: Double,
        horizontalAccuracy: Double,
        verticalAccuracy: Double,
        course: Double,
        speed: Double,
        timestamp: Date
    ) {
        self.init(
            coordinate: coordinate, altitude: altitude, horizontalAccuracy: horizontalAccuracy,
            verticalAccuracy: verticalAccuracy, course: course, courseAccuracy: -1,
            speed: speed, speedAccuracy: -1, timestamp: timestamp)
    }

    /// A location with altitude and accuracies; course and speed invalid.
    public init(
        coordinate: Coordinate,
        altitude: Double,
        horizontalAccuracy: Double,
        verticalAccuracy: Double,
        timestamp: Date
    ) {
        self.init(
            coordinate: coordinate, altitude: altitude, horizontalAccuracy: horizontalAccuracy,
            verticalAccuracy: verticalAccuracy, course: -1, speed: -1, timestamp: timestamp)
    }

    /// A location from latitude and longitude only (as `CLLocation(latitude:longitude:)`):
    /// altitude 0, horizontal accuracy 0, everything else invalid, timestamp 1970-01-01.
    ///
    /// `CLLocation` stamps the current time here; this initialiser does not read the
    /// clock, so equal coordinates give equal values.
    public init(latitude: Double, longitude: Double) {
        self.init(
            coordinate: Coordinate(latitude: latitude, longitude: longitude), altitude: 0,
            horizontalAccuracy: 0, verticalAccuracy: -1, timestamp: Date(timeIntervalSince1970: 0))
    }

    /// The great-circle distance in meters to another location (haversine, mean Earth radius).
    public func distance(from location: CKLocation) -> Double {
        let radius = 6_371_008.8
        let lat1 = latitude * .pi / 180, lat2 = location.latitude * .pi / 180
        let dLat = lat2 - lat1
        let dLon = (location.longitude - longitude) * .pi / 180
        let h = sin(dLat / 2) * sin(dLat / 2) + cos(lat1) * cos(lat2) * sin(dLon / 2) * sin(dLon / 2)
        return 2 * radius * asin(min(1, h.squareRoot()))
    }

    public var description: String {
        "<\(latitude),\(longitude)> +/- \(horizontalAccuracy)m"
    }
}

#if !canImport(CoreLocation)
/// CoreLocation's name for a location; on Linux an alias of `CKLocation`.
public typealias CLLocation = CKLocation
/// CoreLocation's name for a coordinate; on Linux an alias of `CKLocation.Coordinate`.
public typealias CLLocationCoordinate2D = CKLocation.Coordinate
public typealias CLLocationDegrees = Double
public typealias CLLocationDistance = Double
public typealias CLLocationAccuracy = Double
public typealias CLLocationDirection = Double
public typealias CLLocationSpeed = Double
#endif
