// Package interval holds gapless's time arithmetic: half-open UTC ranges,
// merged range sets, and the interval units that models are bucketed by.
//
// Nothing in this package knows about databases, models or cron; it is the
// foundation that the schedule, plan and state packages build on.
package interval

// Unit is the size of one interval bucket of a model.
//
// The zero value is not a valid unit. The string form is the one used in model
// files (interval_unit five_minute ... year).
type Unit string

// The interval units a model can be bucketed by, from finest to coarsest.
const (
	FiveMinute  Unit = "five_minute"
	QuarterHour Unit = "quarter_hour"
	HalfHour    Unit = "half_hour"
	Hour        Unit = "hour"
	Day         Unit = "day"
	Month       Unit = "month"
	Year        Unit = "year"
)
