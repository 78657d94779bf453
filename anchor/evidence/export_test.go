package evidence

// WithoutTimeCheck returns o with chooseTarget taking anchor records
// whatever their times: the evidence a writer without that check made.
func WithoutTimeCheck(o Options) Options {
	o.testingOnlySkipTimes = true
	return o
}
