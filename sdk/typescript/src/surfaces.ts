/** Where a run was triggered and where a person can answer (the request's `surface`). */
export type Surface =
  | { type: "slack"; teamId: string; channelId: string; userId: string; threadTs?: string; enterpriseId?: string }
  | { type: "sms"; phone: string }
  | { type: "whatsapp"; phone: string }
  | { type: "teams"; tenantId: string; conversationId: string; userId: string }
  | { type: "dashboard"; userId: string }
  | { type: "api" }
  | { type: "schedule" }
  | { type: "batch" }
  | { type: "web_widget"; tokenKind: "client" | "server" };

/** The surface types, a closed set. */
export type SurfaceType = Surface["type"];
