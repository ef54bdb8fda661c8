//! Shapes and dtypes of the graphs the front end builds (no evaluation needed).

use tensor_core::{DType, Op, Tensor};

fn t(shape: &[usize]) -> Tensor {
    Tensor::zeros(shape, DType::F32).contiguous()
}

fn ti(shape: &[usize], dtype: DType) -> Tensor {
    Tensor::zeros(shape, dtype).contiguous()
}

#[test]
fn fills_are_a_0d_value_or_a_constant_reshaped_and_expanded() {
    let ops = |t: &Tensor| -> Vec<Op> { t.uop().toposort().iter().map(|u| u.op()).collect() };
    // The user's fill is a value bound at run time: one element, broadcast.
    let z = Tensor::full(&[2, 3], 7.0, DType::F16);
    assert_eq!(z.shape(), vec![2, 3]);
    assert_eq!(z.dtype(), DType::F16);
    assert!(ops(&z).contains(&Op::Buffer) && ops(&z).contains(&Op::Expand));
    assert!(!ops(&z).contains(&Op::Const));
    // Identities and library fills are code.
    for c in [Tensor::zeros(&[2, 3], DType::F16), z.full_like(7.0)] {
        assert!(ops(&c).contains(&Op::Const));
        assert!(!ops(&c).contains(&Op::Buffer));
    }
    assert_eq!(Tensor::scalar(2.5f32).shape(), Vec::<usize>::new());
    assert_eq!(Tensor::scalar(2i64).dtype(), DType::I64);
    assert_eq!(Tensor::ones(&[0, 4], DType::I8).shape(), vec![0, 4]);
}

#[test]
fn binary_ops_broadcast_like_numpy() {
    assert_eq!((t(&[3, 1]) + t(&[4])).shape(), vec![3, 4]);
    assert_eq!((t(&[]) * t(&[2, 2])).shape(), vec![2, 2]);
    assert_eq!((t(&[0, 1]) - t(&[1, 5])).shape(), vec![0, 5]);
    assert_eq!((t(&[2, 1, 3]) / t(&[4, 1])).shape(), vec![2, 4, 3]);
    assert_eq!(t(&[5]).where_(t(&[2, 1]), 0.0).shape(), vec![2, 5]);
}

#[test]
fn tensor_operands_promote_and_scalars_are_weak() {
    let i = ti(&[2], DType::I32);
    let h = ti(&[2], DType::F16);
    let b = ti(&[2], DType::Bool);
    let u8 = ti(&[2], DType::U8);
    assert_eq!((&i + &h).dtype(), DType::F16);
    assert_eq!((&i + 2.5).dtype(), DType::F32);
    assert_eq!((&h * 2.5).dtype(), DType::F16);
    assert_eq!((&u8 + 300).dtype(), DType::U8);
    assert_eq!((&b + 1).dtype(), DType::I32);
    assert_eq!((&b + &b).dtype(), DType::Bool);
    assert_eq!((2.0 - &i).dtype(), DType::F32);
    assert_eq!((1 - &b).dtype(), DType::I32);
    assert_eq!((3 * &u8).dtype(), DType::U8);
    assert_eq!((&i / &i).dtype(), DType::F32);
    assert_eq!(i.exp().dtype(), DType::F32);
    assert_eq!(h.sqrt().dtype(), DType::F16);
    assert_eq!(i.lt(&h).dtype(), DType::Bool);
    assert_eq!(ti(&[2], DType::U8).promote_check(), DType::I16);
}

trait PromoteCheck {
    fn promote_check(&self) -> DType;
}
impl PromoteCheck for Tensor {
    fn promote_check(&self) -> DType {
        (self + &ti(&[1], DType::I8)).dtype()
    }
}

#[test]
fn reductions_drop_or_keep_axes_and_widen_small_integers() {
    let x = t(&[2, 3, 4]);
    assert_eq!(x.sum(1, false).shape(), vec![2, 4]);
    assert_eq!(x.sum(-1, true).shape(), vec![2, 3, 1]);
    assert_eq!(x.max([0, 2], false).shape(), vec![3]);
    assert_eq!(x.mean([0, 1, 2], true).shape(), vec![1, 1, 1]);
    assert_eq!(x.sum_all().shape(), Vec::<usize>::new());
    assert_eq!(x.argmax(-2, false).shape(), vec![2, 4]);
    assert_eq!(x.argmax(1, false).dtype(), DType::I64);
    assert_eq!(ti(&[3], DType::Bool).sum_all().dtype(), DType::I32);
    assert_eq!(ti(&[3], DType::U8).sum_all().dtype(), DType::U32);
    assert_eq!(ti(&[3], DType::I64).sum_all().dtype(), DType::I64);
    assert_eq!(ti(&[3], DType::I8).max_all().dtype(), DType::I8);
    assert_eq!(ti(&[3], DType::I32).mean_all().dtype(), DType::F32);
    let reduce = x.sum(1, false).uop();
    assert_eq!(reduce.op(), Op::Reshape);
    assert_eq!(reduce.s(0).op(), Op::Reduce);
}

#[test]
fn movement_ops_follow_numpy_shapes() {
    let x = t(&[2, 3, 4]);
    assert_eq!(x.reshape(&[4, -1]).shape(), vec![4, 6]);
    assert_eq!(x.permute(&[2, 0, 1]).shape(), vec![4, 2, 3]);
    assert_eq!(x.permute(&[-1, 0, 1]).shape(), vec![4, 2, 3]);
    assert_eq!(x.transpose(0, -1).shape(), vec![4, 3, 2]);
    assert_eq!(t(&[3, 1]).expand(&[2, 3, 5]).shape(), vec![2, 3, 5]);
    assert_eq!(t(&[3, 1]).expand(&[-1, 4]).shape(), vec![3, 4]);
    assert_eq!(x.pad(&[(1, 0), (0, 0), (2, 3)]).shape(), vec![3, 3, 9]);
    assert_eq!(x.shrink(&[(0, 1), (1, 3), (0, 4)]).shape(), vec![1, 2, 4]);
    assert_eq!(x.slice(-1, 1, -1).shape(), vec![2, 3, 2]);
    assert_eq!(x.slice(1, 5, 10).shape(), vec![2, 0, 4]);
    assert_eq!(x.narrow(0, -1, 1).shape(), vec![1, 3, 4]);
    assert_eq!(x.flip([0, -1]).shape(), vec![2, 3, 4]);
    assert_eq!(t(&[2, 1, 3]).squeeze(-2).shape(), vec![2, 3]);
    assert_eq!(x.unsqueeze(-1).shape(), vec![2, 3, 4, 1]);
    assert_eq!(x.unsqueeze(0).shape(), vec![1, 2, 3, 4]);
    assert_eq!(x.flatten(1, -1).shape(), vec![2, 12]);
    assert_eq!(x.flatten(0, 1).shape(), vec![6, 4]);
    assert_eq!(x.ravel().shape(), vec![24]);
    assert_eq!(t(&[]).flatten(0, -1).shape(), vec![1]);
    assert_eq!(x.detach().uop().op(), Op::Detach);
    assert_eq!(x.contiguous().uop().op(), Op::Contiguous);
}

#[test]
fn matmul_shapes_follow_numpy() {
    assert_eq!(t(&[2, 3]).matmul(&t(&[3, 4])).shape(), vec![2, 4]);
    assert_eq!(t(&[3]).matmul(&t(&[3, 4])).shape(), vec![4]);
    assert_eq!(t(&[2, 3]).matmul(&t(&[3])).shape(), vec![2]);
    assert_eq!(t(&[3]).matmul(&t(&[3])).shape(), Vec::<usize>::new());
    assert_eq!(t(&[5, 2, 3]).matmul(&t(&[3, 4])).shape(), vec![5, 2, 4]);
    assert_eq!(
        t(&[5, 1, 2, 3]).matmul(&t(&[6, 3, 4])).shape(),
        vec![5, 6, 2, 4]
    );
    assert_eq!(t(&[3]).matmul(&t(&[5, 3, 4])).shape(), vec![5, 4]);
    assert_eq!(t(&[5, 2, 3]).matmul(&t(&[3])).shape(), vec![5, 2]);
    assert_eq!(t(&[2, 0]).matmul(&t(&[0, 4])).shape(), vec![2, 4]);
    assert_eq!(
        ti(&[2, 3], DType::I8)
            .matmul(&ti(&[3, 2], DType::I32))
            .dtype(),
        DType::I32
    );
    assert_eq!(
        ti(&[2, 3], DType::Bool)
            .matmul(&ti(&[3, 2], DType::Bool))
            .dtype(),
        DType::Bool
    );
}

#[test]
fn indexing_and_joining_shapes() {
    let a = t(&[2, 3]);
    let b = t(&[2, 5]);
    assert_eq!(Tensor::cat(&[a.clone(), b.clone()], -1).shape(), vec![2, 8]);
    assert_eq!(Tensor::cat(&[a.clone(), a.clone()], 0).shape(), vec![4, 3]);
    assert_eq!(
        Tensor::stack(&[a.clone(), a.clone()], 0).shape(),
        vec![2, 2, 3]
    );
    assert_eq!(
        Tensor::stack(&[a.clone(), a.clone()], -1).shape(),
        vec![2, 3, 2]
    );
    assert_eq!(
        Tensor::stack(&[a.clone(), a.clone(), a.clone()], 1).shape(),
        vec![2, 3, 3]
    );
    let idx = ti(&[2, 7], DType::I32);
    assert_eq!(a.gather(1, &idx).shape(), vec![2, 7]);
    assert_eq!(a.gather(-1, &ti(&[1, 4], DType::I64)).shape(), vec![1, 4]);
    assert_eq!(
        a.take_along_axis(&ti(&[1, 4], DType::I64), -1).shape(),
        vec![2, 4]
    );
    assert_eq!(
        t(&[10, 4]).take(&ti(&[2, 3], DType::I32), 0).shape(),
        vec![2, 3, 4]
    );
    assert_eq!(
        t(&[4, 10]).take(&ti(&[5], DType::I32), 1).shape(),
        vec![4, 5]
    );
    assert_eq!(ti(&[3], DType::I32).one_hot(10).shape(), vec![3, 10]);
    assert_eq!(ti(&[3], DType::I32).one_hot(10).dtype(), DType::I64);
    assert_eq!(
        ti(&[3], DType::I32).one_hot_as(10, DType::F32).dtype(),
        DType::F32
    );
    assert_eq!(t(&[3, 4]).cumsum(0).shape(), vec![3, 4]);
    assert_eq!(ti(&[3], DType::Bool).cumsum(0).dtype(), DType::I32);
    assert_eq!(t(&[3, 4]).softmax(-1).shape(), vec![3, 4]);
    assert_eq!(t(&[3, 4]).logsumexp(1, false).shape(), vec![3]);
    assert_eq!(t(&[3, 4]).logsumexp([0, 1], true).shape(), vec![1, 1]);
}

#[test]
fn ranges_and_random_tensors_have_their_shapes_and_dtypes() {
    assert_eq!(Tensor::arange(10).shape(), vec![10]);
    assert_eq!(Tensor::arange(10).dtype(), DType::I32);
    assert_eq!(Tensor::arange(0).shape(), vec![0]);
    assert_eq!(Tensor::arange((0, 10, 3)).shape(), vec![4]);
    assert_eq!(Tensor::arange((5, 0, -2)).shape(), vec![3]);
    assert_eq!(Tensor::arange((0.0f32, 1.0, 0.25)).dtype(), DType::F32);
    assert_eq!(Tensor::arange((0.0f32, 1.0, 0.25)).shape(), vec![4]);
    assert_eq!(Tensor::eye(3, DType::F32).shape(), vec![3, 3]);
    assert_eq!(Tensor::rand(&[2, 3], 0).shape(), vec![2, 3]);
    assert_eq!(Tensor::randn(&[5], 0).dtype(), DType::F32);
    assert_eq!(
        Tensor::from_vec(vec![1u8, 2, 3, 4], &[2, 2]).dtype(),
        DType::U8
    );
}

#[test]
fn elementwise_graphs_use_the_tinyspec_decompositions() {
    let a = t(&[3]);
    let b = t(&[3]);
    assert_eq!(a.sub(&b).uop().op(), Op::Add);
    assert_eq!(a.neg().uop().op(), Op::Mul);
    // Division keeps tinyspec's `Div` as one op: `Mul(a, Recip(b))` is not correctly rounded.
    assert_eq!(a.div(&b).uop().op(), Op::Div);
    assert_eq!(a.recip().uop().op(), Op::Recip);
    let gt = a.gt(&b).uop();
    assert_eq!(
        (gt.op(), gt.s(0).clone(), gt.s(1).clone()),
        (Op::CmpLt, b.uop(), a.uop())
    );
    let eq = a.eq(&b).uop();
    assert_eq!((eq.op(), eq.s(0).op()), (Op::CmpNe, Op::CmpNe));
    assert_eq!(a.exp().uop().op(), Op::Exp2);
    assert_eq!(a.log().uop().op(), Op::Mul);
    assert_eq!(a.pow(&b).uop().op(), Op::Pow);
    // `Div` is the one decomposed op kept whole (see above). `Pow` is an op of its own, like
    // `Cos` and `Erf`, so the transforms differentiate what was written (`codegen` lowers it).
    let decomposed = [Op::Sub, Op::Neg, Op::CmpGt, Op::CmpEq, Op::CmpGe, Op::CmpLe];
    let all = [
        a.sub(&b),
        a.neg(),
        a.div(&b),
        a.gt(&b),
        a.eq(&b),
        a.ge(&b),
        a.le(&b),
        a.logical_not(),
        a.pow(&b),
        a.pow(3.0),
        a.minimum(&b),
        a.tanh(),
        a.cos(),
    ];
    for x in all {
        for node in x.uop().toposort() {
            assert!(
                !decomposed.contains(&node.op()),
                "{:?} left in {:?}",
                node.op(),
                x
            );
        }
    }
}
