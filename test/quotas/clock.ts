/** 5 s into a minute that has not begun yet: a fixed instant for an injected clock, so no quota window ends mid-test and nothing expires under it. */
export function fixedMinute(): number {
  return (Math.floor(Date.now() / 60_000) + 2) * 60_000 + 5_000;
}
