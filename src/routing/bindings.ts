import type { InboundMessage } from "../channels/types.js";
import type { Binding, Config } from "../config/schema.js";

/**
 * Agent selection (first match wins): exact peer, then the parent peer for threads, then the
 * account on the channel, then the channel, then the default agent (first in agents.list).
 */
export function resolveAgent(config: Config, msg: InboundMessage): { agentId: string; matchedBy: string } {
  const onChannel = config.bindings.filter(
    (b) => !b.match.channel || b.match.channel.toLowerCase() === msg.channel,
  );
  const peerKind = msg.chatType;
  const peerMatch = (b: Binding, id: string | undefined) =>
    id !== undefined &&
    b.match.peer !== undefined &&
    (b.match.peer.kind === peerKind || (b.match.peer.kind !== "direct" && peerKind !== "direct")) &&
    b.match.peer.id.toLowerCase() === id.toLowerCase() &&
    (!b.match.accountId || b.match.accountId === msg.accountId);
  const accountOk = (b: Binding) =>
    !b.match.accountId || b.match.accountId === "*" || b.match.accountId === msg.accountId;

  const exact = onChannel.find((b) => peerMatch(b, msg.peerId));
  if (exact) return { agentId: exact.agentId, matchedBy: "peer" };
  if (msg.parentPeerId) {
    const parent = onChannel.find((b) => peerMatch(b, msg.parentPeerId));
    if (parent) return { agentId: parent.agentId, matchedBy: "parent-peer" };
  }
  const account = onChannel.find(
    (b) => !b.match.peer && b.match.accountId && b.match.accountId !== "*" && accountOk(b) && b.match.channel,
  );
  if (account) return { agentId: account.agentId, matchedBy: "account" };
  const channel = onChannel.find(
    (b) => !b.match.peer && (!b.match.accountId || b.match.accountId === "*") && b.match.channel,
  );
  if (channel) return { agentId: channel.agentId, matchedBy: "channel" };
  return { agentId: config.agents.list[0]?.id ?? "main", matchedBy: "default" };
}
