package state

import "slices"

// The pull-request bot's history events (package bot): one per step a
// person may ask about later ("who deployed this, from which PR, and was
// it merged?"). Each carries the repository, the pull request and the head
// in its Data; Reason holds the outcome or the trigger.
const (
	// EventPRPlanned: a pull request's head was planned (Reason: the
	// verdict, success, changes or failure; PlanID: the prod preview).
	EventPRPlanned = "pr_planned"
	// EventDeployRequested: a deploy attempt was recorded (Reason: its
	// trigger, deploy_command or merge).
	EventDeployRequested = "deploy_requested"
	// EventDeployRefused: a /deploy was refused (Reason: why).
	EventDeployRefused = "deploy_refused"
	// EventDeployStarted: a deploy attempt started running.
	EventDeployStarted = "deploy_started"
	// EventDeployFinished: a deploy attempt ended (Reason: promoted,
	// failed or cancelled; PlanID: the plan it applied).
	EventDeployFinished = "deploy_finished"
	// EventDeployMerged: the merge after a promoted /deploy (Reason:
	// merged, or not_merged with the reason in Data).
	EventDeployMerged = "deploy_merged"
)

// BotEventKinds returns the kinds of the pull-request bot's history
// events, the closed set package bot appends.
func BotEventKinds() []string { return slices.Clone(botEventKinds) }

var botEventKinds = []string{
	EventPRPlanned, EventDeployRequested, EventDeployRefused,
	EventDeployStarted, EventDeployFinished, EventDeployMerged,
}
