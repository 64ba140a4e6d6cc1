-- rate: take `amount` from a fixed window's budget (the abuse limits: mediator/mediation/abuse.py).
-- KEYS[1] the window's counter (keys.rate_window)
-- ARGV[1] amount (0: only ask)  ARGV[2] the window's budget  ARGV[3] the window's length (ms)
-- Returns (replies.BudgetReply) 0 when taken, else the milliseconds until the window ends
-- (nothing taken: a refused request does not use up what its sender may do in the next
-- window).
return take_budget(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]))
