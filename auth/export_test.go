package auth

// Remembered is how many verified tokens a remembers.
func Remembered(a *Authenticator) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.verified)
}
