package dev.compute.benchmarks.replay;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

class ClimbCommandTest {

    private static final long MiB = 1L << 20;

    /** The windows from 512 MiB to 8 GiB, replayed once for the tests that read them. */
    private static final List<ClimbCommand.Window> WINDOWS = ClimbCommand.windows(512 * MiB, 8192 * MiB);

    @Test
    void theWindowsAreTheDoublingsAndEachPrefixIsReplayedOnce() {
        assertThat(WINDOWS).extracting(ClimbCommand.Window::fromBytes).containsExactly(512 * MiB, 1024 * MiB, 2048 * MiB, 4096 * MiB);
        long[] sizes = ClimbCommand.climb(8192 * MiB);
        long live = 0;
        int inRange = 0;
        for (long size : sizes) {
            live += size;
            inRange += live >= 512 * MiB && live < 8192 * MiB ? 1 : 0;
        }
        assertThat(WINDOWS.stream().mapToInt(ClimbCommand.Window::prefixes).sum()).isEqualTo(inRange);
        assertThat(Arrays.stream(sizes).min().orElseThrow()).isGreaterThanOrEqualTo(MiB);
        assertThat(Arrays.stream(sizes).max().orElseThrow()).isLessThanOrEqualTo(16 * MiB);
    }

    @Test
    void aPrefixIsItsAllocationsThenTheirFrees() {
        Trace prefix = ClimbCommand.prefix(new long[] {3 * MiB, 5 * MiB, 7 * MiB}, 2);

        assertThat(prefix.bytes()).containsExactly(3 * MiB, 5 * MiB, 0, 0);
        assertThat(prefix.livePeak()).isEqualTo(8 * MiB);
    }

    /** The growth policy's chunk is at most an eighth of what is mapped: no climb, stopped anywhere, reserves more over it. */
    @Test
    void theSlackOfGrowthStaysWithinAnEighthOfWhatIsMapped() {
        for (ClimbCommand.Window window : WINDOWS) {
            // an eighth, plus the last allocation that did not fit the slack before it (16 MiB at most) and a page
            assertThat(window.worst()).as(window.line()).isLessThanOrEqualTo(1.125 + (18.0 * MiB) / window.fromBytes());
        }
    }

    /**
     * The bound the command prints holds on both policies' figures: a window with fewer backend calls than it has a
     * prefix over the goal. PyTorch's model maps a 20 MiB page at a time, so from 1 GiB it stays under the goal, and pays
     * for it with more calls than the bound in each window.
     */
    @Test
    void aWindowWithFewerCallsThanTheBoundHasAPrefixOverTheGoal() {
        int bound = ClimbCommand.callsPerDoubling(ClimbCommand.GOAL);
        assertThat(bound).isEqualTo(36);
        for (ClimbCommand.Window window : WINDOWS) {
            if (window.toBytes() == 2 * window.fromBytes()) {
                if (window.lastCalls() - window.firstCalls() < bound) {
                    assertThat(window.overGoal()).as(window.line()).isPositive();
                }
                if (window.pytorchLastCalls() - window.pytorchFirstCalls() < bound) {
                    assertThat(window.pytorchOverGoal()).as(window.line()).isPositive();
                }
            }
            if (window.fromBytes() >= 1024 * MiB) {
                assertThat(window.pytorchOverGoal()).as(window.line()).isZero();
                assertThat(window.pytorchLastCalls() - window.pytorchFirstCalls()).as(window.line()).isGreaterThanOrEqualTo(bound);
            }
        }
    }

    @Test
    void theCommandPrintsAWindowPerDoublingAndTheBound() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int status = ClimbCommand.run(new String[] {"256", "1024"}, new PrintStream(out, true, StandardCharsets.UTF_8), System.err);

        assertThat(status).isZero();
        assertThat(out.toString(StandardCharsets.UTF_8).lines().toList()).satisfiesExactly(
                line -> assertThat(line).startsWith("climb window_mib=256..512 prefixes="),
                line -> assertThat(line).startsWith("climb window_mib=512..1024 prefixes=").contains(" pytorch_worst=")
                        .contains(" fewer_calls_than_pytorch=").contains(" more_reserved_than_pytorch="),
                line -> assertThat(line).startsWith("pytorch: fewer calls than PyTorch's first at "),
                line -> assertThat(line).isEqualTo("bound: every prefix of a doubling at or under 1.02 takes at least 36 backend calls within it, whatever the policy"));
    }

    /**
     * Our growth makes fewer calls than PyTorch's on the climb (six a doubling against one a 20 MiB page), and, as the
     * argument in {@link ClimbCommand} says of any policy, it reserves more than PyTorch's at a prefix no later than the
     * first where it calls less.
     */
    @Test
    void ourPolicyReservesMoreThanPyTorchsNoLaterThanItFirstCallsLess() {
        ClimbCommand.Climb climb = ClimbCommand.climbFigures(16 * MiB, 1024 * MiB);

        assertThat(climb.firstFewerCallsAt()).as("ours calls less at some prefix").isPositive();
        assertThat(climb.firstMoreReservedAt()).as("and reserves more at one no later").isPositive().isLessThanOrEqualTo(climb.firstFewerCallsAt());
        assertThat(climb.windows()).allSatisfy(w -> assertThat(w.fewerCallsThanPyTorch() == 0 || w.moreReservedThanPyTorch() > 0
                || climb.firstMoreReservedAt() < w.fromBytes()).as(w.line()).isTrue());
    }

    /**
     * The argument itself, on policies of every kind against PyTorch's model on the same climb: a call maps what the live
     * bytes need and any slack the policy draws (whole 2 MiB pages, from none to far more than PyTorch's 20 MiB page,
     * some policies a fixed amount, some growing, some random). Each that makes fewer calls than PyTorch's at a prefix
     * reserves more at one no later; and the policy that maps to PyTorch's next 20 MiB boundary matches it call for call.
     */
    @Test
    void noPolicyCallsLessThanPyTorchOnAClimbWithoutReservingMoreAtAPrefixNoLater() {
        long[] sizes = java.util.Arrays.copyOf(ClimbCommand.climb(600 * MiB), 70);
        int n = sizes.length;
        long[] pytorchReserved = new long[n + 1];
        long[] pytorchCalls = new long[n + 1];
        long[] live = new long[n + 1];
        for (int k = 1; k <= n; k++) {
            PyTorchExpandableSegments.Figures figures = PyTorchExpandableSegments.replay(ClimbCommand.prefix(sizes, k));
            pytorchReserved[k] = figures.reservedPeak();
            pytorchCalls[k] = figures.mapCalls();
            live[k] = live[k - 1] + PyTorchExpandableSegments.roundSize(sizes[k - 1]);
            assertThat(pytorchReserved[k]).as("PyTorch's pages on a climb").isEqualTo(Math.ceilDiv(live[k], 20 * MiB) * 20 * MiB);
        }
        java.util.SplittableRandom random = new java.util.SplittableRandom(5);
        int calledLess = 0;
        for (int policy = 0; policy < 2000; policy++) {
            long reserved = 0;
            long calls = 0;
            int firstMore = Integer.MAX_VALUE;
            long fixedSlack = random.nextInt(40) * 2 * MiB;
            boolean growing = policy % 3 == 1;
            boolean pytorchLike = policy == 0;
            for (int k = 1; k <= n; k++) {
                if (live[k] > reserved) {
                    calls++;
                    long slack = pytorchLike ? Math.ceilDiv(live[k], 20 * MiB) * 20 * MiB - Math.ceilDiv(live[k], 2 * MiB) * 2 * MiB
                            : policy % 3 == 0 ? random.nextInt(64) * 2 * MiB : growing ? Math.ceilDiv(reserved / 8, 2 * MiB) * 2 * MiB : fixedSlack;
                    reserved = Math.ceilDiv(live[k], 2 * MiB) * 2 * MiB + slack;
                }
                if (reserved > pytorchReserved[k]) {
                    firstMore = Math.min(firstMore, k);
                }
                if (calls < pytorchCalls[k]) {
                    calledLess++;
                    assertThat(firstMore).as("policy %d calls less than PyTorch at prefix %d", policy, k).isLessThanOrEqualTo(k);
                }
                if (pytorchLike) {
                    assertThat(calls).isEqualTo(pytorchCalls[k]);
                    assertThat(reserved).isEqualTo(pytorchReserved[k]);
                }
            }
        }
        assertThat(calledLess).as("prefixes where a policy called less than PyTorch").isPositive();
    }

    @Test
    void aWrongCommandLineExitsWithTwoAndTheUsage() {
        for (String[] args : List.of(new String[] {"256"}, new String[] {"1024", "256"}, new String[] {"8", "64"},
                new String[] {"256", "100000"}, new String[] {"256", "1g"})) {
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            int status = ClimbCommand.run(args, System.out, new PrintStream(err, true, StandardCharsets.UTF_8));

            assertThat(status).as(String.join(" ", args)).isEqualTo(2);
            assertThat(err.toString(StandardCharsets.UTF_8)).startsWith("climb: ").contains(ClimbCommand.USAGE);
        }
    }
}
