package live

// StopLease stops renewing the image's lease, as a killed arenactl would.
func (im *Image) StopLease() {
	if im.stop != nil {
		close(im.stop)
		im.beatDone.Wait()
		im.stop = nil
	}
}
