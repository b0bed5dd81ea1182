/**
 * Middleware composition for inbound gating (grammY/Hono style): each gate is `(ctx, next)`;
 * not calling `next` stops the message. Calling `next` twice is a bug and throws.
 */
export type Middleware<C> = (ctx: C, next: () => Promise<void>) => Promise<void>;

export function compose<C>(
  middleware: ReadonlyArray<Middleware<C>>,
): (ctx: C, last?: () => Promise<void>) => Promise<void> {
  return (ctx, last) => {
    let index = -1;
    const dispatch = async (i: number): Promise<void> => {
      if (i <= index) throw new Error("next() called more than once in an inbound gate");
      index = i;
      const fn = i === middleware.length ? last : middleware[i];
      if (!fn) return;
      await fn(ctx, () => dispatch(i + 1));
    };
    return dispatch(0);
  };
}

/** A gate that lets a message through only when `predicate` holds (the one filter primitive). */
export function filter<C>(
  predicate: (ctx: C) => boolean | Promise<boolean>,
  onDrop?: (ctx: C) => void,
): Middleware<C> {
  return async (ctx, next) => {
    if (await predicate(ctx)) await next();
    else onDrop?.(ctx);
  };
}
