//! Rendered kernels read back from storage: a runtime that kept a kernel's fields (a plan on
//! disk) gets a sealed kernel again without rendering it anew.

use super::{Kernel, Launch};
use crate::codegen::program::KernelArg;

impl Kernel {
    /// The kernel whose fields are these, sealed as a renderer seals what it makes.
    ///
    /// # Safety
    ///
    /// The fields must be those of a kernel a renderer made, unchanged: launches trust
    /// `args` and `launch` to bound what `source` touches. A runtime may call this for
    /// fields it wrote itself from such a kernel and read back intact (checksummed, from a
    /// file only the current user can have written).
    pub unsafe fn from_stored(
        name: String,
        source: String,
        entry: String,
        launch: Launch,
        args: Vec<KernelArg>,
    ) -> Kernel {
        Kernel::rendered(name, source, entry, launch, args)
    }
}

#[cfg(test)]
mod tests {
    use crate::codegen::{CodegenOptions, lower_kernel_named};
    use crate::render::c::render_kernel;
    use crate::{DType, Tensor};

    #[test]
    fn stored_fields_give_back_an_equal_sealed_kernel() {
        let t = Tensor::from_vec(vec![1.0f32, 2.0], &[2]) + 1.0;
        let schedule = crate::schedule::create_schedule(&[t.uop()]);
        let item = &schedule.items[0];
        let lowered = lower_kernel_named(
            &item.ast,
            &item.buffer_sizes(),
            &CodegenOptions::default(),
            "E_2",
        );
        let kernel = render_kernel(&lowered);
        let k = kernel.clone();
        // SAFETY: the fields of a kernel the C renderer just made.
        let back =
            unsafe { super::Kernel::from_stored(k.name, k.source, k.entry, k.launch, k.args) };
        assert!(back.is_as_rendered());
        assert_eq!(back, kernel);
        assert_eq!(back.args[0].dtype, DType::F32);
    }
}
