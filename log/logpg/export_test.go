package logpg

// SetTrips makes every commit of s try one round trip first (1), or none
// (2), for the tests of package logpg_test.
func SetTrips(s *Store, n int) { s.testingOnlyTrips = n }
