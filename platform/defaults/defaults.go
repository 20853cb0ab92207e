// Package defaults fills in the settings a configuration leaves unset.
package defaults

// Number is a setting a zero or negative value leaves unset: a count, a
// size, a duration.
type Number interface {
	~int | ~int32 | ~int64 | ~float64
}

// Positive is v when it is above zero and d otherwise: the value of a
// setting whose zero or negative value means "the default".
func Positive[T Number](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}
