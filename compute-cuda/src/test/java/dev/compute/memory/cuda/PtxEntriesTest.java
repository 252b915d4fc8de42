package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.contract.KernelContractTest;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The PTX reader that launches are checked against: plain text, no GPU. */
class PtxEntriesTest {

    @Test
    void readsTheEntriesAndTheirParametersAsNvccWritesThem() {
        assertThat(PtxEntries.read(KernelContractTest.PTX)).containsOnlyKeys("affine", "scale_in_place", "iota2d", "clamp_f64")
                .containsEntry("affine", List.of(PtxEntries.Kind.BITS64, PtxEntries.Kind.BITS64, PtxEntries.Kind.BITS64,
                        PtxEntries.Kind.FLOAT32, PtxEntries.Kind.FLOAT64, PtxEntries.Kind.BITS32))
                .containsEntry("iota2d", List.of(PtxEntries.Kind.BITS64, PtxEntries.Kind.BITS32, PtxEntries.Kind.BITS32));
    }

    @Test
    void structsByValueAndSmallTypesFitNoArgumentAndAnEntryWithoutParametersTakesNone() {
        String ptx = """
                .visible .entry by_value(
                    .param .align 8 .b8 by_value_param_0[16],
                    .param .u16 by_value_param_1,
                    .param .u64 .ptr .global .align 4 by_value_param_2
                )
                { ret; }
                .entry nothing()
                { ret; }
                """;
        assertThat(PtxEntries.read(ptx))
                .containsEntry("by_value", List.of(PtxEntries.Kind.OTHER, PtxEntries.Kind.OTHER, PtxEntries.Kind.BITS64))
                .containsEntry("nothing", List.of());
    }

    /** A comment is no code to the driver: an entry or a {@code .reqntid} commented out is none. */
    @Test
    void whatACommentSaysIsNotRead() {
        String ptx = """
                .visible .entry scale(
                    .param .u64 scale_param_0,
                    .param .f32 scale_param_1
                )
                // .reqntid 128 (dropped: any block runs it now)
                { ret; }
                /* the first version, kept for reference:
                .visible .entry scale(
                    .param .u64 scale_param_0
                )
                */
                // .entry retired(.param .u64 retired_param_0)
                """;
        assertThat(PtxEntries.read(ptx)).containsOnlyKeys("scale")
                .containsEntry("scale", List.of(PtxEntries.Kind.BITS64, PtxEntries.Kind.FLOAT32));
        assertThat(PtxEntries.requiredBlock(ptx, "scale")).isNull();
    }

    @Test
    void theBlockAnEntryRequiresIsItsOwnReqntidWithOneForTheDimensionsItLeavesOut() {
        String ptx = """
                .visible .entry flat(
                    .param .u64 flat_param_0
                )
                .reqntid 128
                { ret; }
                .visible .entry grid(
                    .param .u64 grid_param_0
                )
                .maxntid 256, 1, 1
                .reqntid 8, 4
                { ret; }
                .visible .entry free(
                    .param .u64 free_param_0
                )
                .maxntid 256, 1, 1
                { .reqntid 64; }
                """;
        assertThat(PtxEntries.requiredBlock(ptx, "flat")).containsExactly(128, 1, 1);
        assertThat(PtxEntries.requiredBlock(ptx, "grid")).containsExactly(8, 4, 1);
        assertThat(PtxEntries.requiredBlock(ptx, "free")).as("only before the body").isNull();
        assertThat(PtxEntries.requiredBlock(KernelContractTest.PTX, "affine")).isNull();
    }
}
