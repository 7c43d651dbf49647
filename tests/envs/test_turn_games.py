"""A turn-by-turn PettingZoo game seen from one seat (:mod:`tfagents_vtrace.envs.turn_games`):
Connect Four's lookahead player on boards built by hand, and the seat's rewards, outcomes and
alternating seats against the game's own record."""

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("pygame")  # Connect Four's module imports it

from pettingzoo.classic import connect_four_v3  # noqa: E402

from tfagents_vtrace.envs.turn_games import (  # noqa: E402
    TurnGame,
    connect_four_lookahead,
    random_opponent,
)


def _board(mine, theirs):
    """``[6, 7, 2]`` with pieces at ``(row, col)`` (row 5 is the bottom)."""
    board = np.zeros((6, 7, 2), np.int8)
    for r, c in mine:
        board[r, c, 0] = 1
    for r, c in theirs:
        board[r, c, 1] = 1
    return board


def _four(cells):
    """Whether ``cells`` ``[6, 7]`` bool hold four in a row, by every window of four."""
    for r in range(6):
        for c in range(7):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                rs, cs = r + dr * np.arange(4), c + dc * np.arange(4)
                if rs.max() < 6 and 0 <= cs.min() and cs.max() < 7 and cells[rs, cs].all():
                    return True
    return False


def _obs(board):
    full = (board.sum(-1) > 0)[0]
    return {"observation": board, "action_mask": (~full).astype(np.int8)}


def test_lookahead_wins_now_then_blocks_then_plays_at_random():
    rng = np.random.default_rng(0)
    # three of mine on the bottom row at columns 1-3: column 0 or 4 wins
    win = _board([(5, 1), (5, 2), (5, 3)], [(4, 1), (4, 2)])
    assert connect_four_lookahead(_obs(win), "p", rng) in (0, 4)
    # theirs stacked three high in column 6: only column 6 blocks
    block = _board([(5, 0), (5, 2)], [(5, 6), (4, 6), (3, 6)])
    assert connect_four_lookahead(_obs(block), "p", rng) == 6
    # a diagonal of mine: (5,0), (4,1), (3,2); column 3 lands at row 2 when rows 3-5 are full
    diag = _board([(5, 0), (4, 1), (3, 2), (5, 3)], [(5, 1), (5, 2), (4, 2), (4, 3), (3, 3)])
    assert connect_four_lookahead(_obs(diag), "p", rng) == 3
    # nothing to win or block: any allowed column
    quiet = _board([(5, 0)], [(5, 6)])
    moves = {connect_four_lookahead(_obs(quiet), "p", rng) for _ in range(50)}
    assert len(moves) > 3 and moves <= set(range(7))


def test_the_seat_gets_the_games_final_reward_and_seats_alternate():
    env = TurnGame(connect_four_v3.env, opponent="random")
    rng = np.random.default_rng(1)
    obs, info = env.reset(seed=3)
    seats, outcomes = [], []
    for _ in range(40):
        seat, total, done = info["seat"], 0.0, False
        while not done:
            assert env.game.agent_selection == env.seat  # the board is the seat's to play
            obs, reward, terminated, truncated, step_info = env.step(random_opponent(obs, "", rng))
            total += reward
            done = terminated or truncated
        # the final board: the seat won iff it has four in a row, lost iff the other has
        board = np.asarray(env.game.unwrapped.board).reshape(6, 7)
        expected = 1 if _four(board == seat + 1) else -1 if _four(board == 2 - seat) else 0
        assert total == step_info["outcome"] == expected
        seats.append(seat)
        outcomes.append(step_info["outcome"])
        obs, info = env.reset()
    assert seats[:4] == [0, 1, 0, 1]
    assert set(outcomes) <= {-1, 0, 1} and {-1, 1} <= set(outcomes)


def test_the_lookahead_player_beats_random_most_games():
    env = TurnGame(connect_four_v3.env, opponent="lookahead")
    rng = np.random.default_rng(2)
    obs, _ = env.reset(seed=0)
    losses = 0
    for _ in range(60):
        done = False
        while not done:
            obs, _, terminated, truncated, info = env.step(random_opponent(obs, "", rng))
            done = terminated or truncated
        losses += info["outcome"] == -1
        obs, _ = env.reset()
    assert losses >= 48  # the random seat loses at least 80% of the games


def test_bad_seats_and_opponents_are_refused():
    with pytest.raises(ValueError, match=r"^seat: expected 'alternate' or one of"):
        TurnGame(connect_four_v3.env, seat="player_9")
    with pytest.raises(ValueError, match=r"^opponent: expected one of"):
        TurnGame(connect_four_v3.env, opponent="greedy")


def test_evaluations_count_wins_draws_and_losses_of_a_game():
    """``tv.evaluate`` of a player in a seat: its win, draw and loss rates are the outcomes
    the games end with, counted again here from the returns (+1 win, -1 loss, 0 draw)."""
    from tfagents_vtrace.export.playing import outcome_rates, play

    env_fns = [lambda: TurnGame(connect_four_v3.env, opponent="random", seat="player_0")] * 4
    import gymnasium as gym

    env = gym.vector.SyncVectorEnv(env_fns, autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)
    obs, info = env.reset(seed=0)
    rng = np.random.default_rng(0)

    def act(obs, first, reward, running):  # column 0 plays columns of the board in turn
        return np.array([random_opponent({"action_mask": m}, "", rng)
                         for m in obs["action_mask"]])  # fmt: skip

    outcomes = []
    returns, _ = play(env, obs, act, np.full(4, 5), outcomes=outcomes)
    assert len(outcomes) == len(returns) == 20
    np.testing.assert_array_equal(outcomes, np.sign(returns))
    rates = outcome_rates(outcomes, 20)
    assert rates["win_rate"] == np.mean(np.asarray(returns) > 0)
    assert rates["loss_rate"] == np.mean(np.asarray(returns) < 0)
    assert outcome_rates(outcomes[:-1], 20) == {}  # not every episode reported one


def test_is_self_play_makes_one_game_per_registration_and_kwargs():
    """A run asks several times whether its game is played against 'self': the maker is
    called once per registration and kwargs, and a new registration under the id is asked
    again."""
    import gymnasium as gym

    from tfagents_vtrace.envs.turn_games import is_self_play

    made = []

    def game(opponent="self"):
        made.append(opponent)
        return TurnGame(connect_four_v3.env, opponent=opponent)

    env_id = "user/test_turn_games.counted-v0"
    gym.register(env_id, entry_point=game)
    try:
        assert [is_self_play(env_id) for _ in range(3)] == [True] * 3
        assert not is_self_play(env_id, {"opponent": "random"})
        assert made == ["self", "random"]
        gym.registry.pop(env_id)
        gym.register(env_id, entry_point=lambda: TurnGame(connect_four_v3.env))
        assert not is_self_play(env_id) and made == ["self", "random"]
    finally:
        gym.registry.pop(env_id, None)
