package daemon

import "github.com/failoverd/failoverd/status"

// HealthGroup is what a load balancer's health check reads (api.HealthSource):
// group name's status as Snapshot gives it, without its readiness, and
// whether this daemon leads. It reads what the loop last published (no
// SQL, no store read) and only that group, so a health check costs a
// fraction of a status read whatever the number of groups.
func (d *Daemon) HealthGroup(name string) (g status.Group, leading, ok bool) {
	now := d.opts.Clock()
	leading = d.lead.leading()
	for _, grp := range d.groupList() {
		if grp.cfg.Name == name {
			return grp.snapshotOf(now, false), leading, true
		}
	}
	return status.Group{}, leading, false
}
